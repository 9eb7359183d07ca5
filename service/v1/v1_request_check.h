#pragma once
// The checks every infergate.v1 InferRequest gets before anything of it is
// decoded, in the order the Infer handler runs them: the input count, the
// precision, the fallback policy, then each input's dtype, shape, element
// count and byte count (ValidateWireTensor). The handler and the request
// fuzzer both run exactly this, so what the fuzzer holds to is the server's
// own order, not a restatement of it. No LibTorch.
//
// Pure function; any thread.

#include <vector>

#include "absl/status/statusor.h"
#include "devices/precision.h"
#include "infergate/v1/inference.pb.h"
#include "service/call/wire_tensor.h"

namespace infergate {

// What the request says once its fields passed.
struct CheckedInferRequest {
  Precision precision = Precision::kAuto;
  bool allow_fallback = true;
  std::vector<WireTensorInfo> inputs;  // inputs(i)'s, in order
};

// infergate.v1.Precision's number `wire` as a Precision; INVALID_ARGUMENT
// naming `field` for a number it does not have.
absl::StatusOr<Precision> PrecisionFromWire(int wire, absl::string_view field);

// INVALID_ARGUMENT naming the field at fault ("precision",
// "inputs[2].shape[1]") for the first check that fails.
absl::StatusOr<CheckedInferRequest> CheckInferRequest(const v1::InferRequest& request, const CodecLimits& limits);

}  // namespace infergate
