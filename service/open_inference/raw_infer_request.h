#pragma once
// Triton's raw binary request: a REST infer request whose
// Inference-Header-Content-Length is 0 has no JSON at all; the whole body
// is the bytes of the model's one input, whose name, datatype and shape
// come from the model's configuration (`config`, as the ModelConfig
// extension serves it):
//   - the model must declare exactly one input;
//   - its shape is the configured dims, after a batch dimension of 1 when
//     the model batches (max_batch_size > 0); one variable dimension (-1)
//     is deduced from the body's size, more than one is refused;
//   - a BYTES input must have dims [1]: the body is that one string (its
//     4-byte length is prepended as the protocol's binary form has it);
//   - every output is answered in binary form (the JSON header, then the
//     bytes), as Triton answers a raw request.
// Refusals are Triton's texts, INVALID_ARGUMENT. The body's size against
// the deduced shape is checked afterwards by the shared decoder, like any
// binary input.
// Pure function; no LibTorch.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"
#include "service/open_inference/open_inference_json.h"

namespace infergate {

absl::StatusOr<RestInferRequest> ParseRawInferRequest(absl::string_view body, const inference::ModelConfig& config,
                                                      const std::string& model, const std::string& version);

}  // namespace infergate
