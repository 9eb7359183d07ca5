#pragma once
// The Open Inference Protocol's tensors and parameters <-> the core's types:
// datatype strings, raw and typed input contents, raw outputs, and the
// request/response parameters that carry infergate's device choice and
// placement. Shared by the gRPC front end (and the REST one to come).

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "devices/dtype.h"
#include "inference/grpc_service.pb.h"
#include "scheduler/model/inference_types.h"
#include "service/call/wire_tensor.h"
#include "service/open_inference/open_inference_datatype.h"

namespace infergate {

// Fills `out` (model, version, inputs, device choice, deadline from the
// `timeout` parameter) from `request`, and checks the `timing` parameter.
// Raw input tensors and strings alias the request's bytes, so `request` must outlive
// `out`'s use. Errors are INVALID_ARGUMENT naming the field, e.g.
// "inputs[1].shape".
absl::Status DecodeInferRequest(const inference::ModelInferRequest& request, const CodecLimits& limits,
                                InferenceRequest* out);

// The most classes any requested output asks for (its `classification`
// parameter); 0 when none does.
uint64_t MaxClassCount(const inference::ModelInferRequest& request);

// Writes the answer: outputs (only those requested, in the order asked, or
// all in the model's order) as raw_output_contents, and the placement as
// response parameters:
//   device, dtype                  always (the device that ran it, and the
//                                  dtype it computed in)
//   requested_device               when the client named a device
//   fell_back (true), fallback_reason
//                                  only when it ran elsewhere than asked
//   precision_reason               when the dtype is not the one asked for
//   batch_size, queue_us, compute_us
//                                  only when the request's `timing`
//                                  parameter is true
// The served version is the answer's model_version. INVALID_ARGUMENT for a
// requested output the model does not have.
absl::Status EncodeInferResponse(const inference::ModelInferRequest& request, InferenceResult& result,
                                 inference::ModelInferResponse* response);

}  // namespace infergate
