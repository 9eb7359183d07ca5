#include "service/v1/v1_request_check.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/proto_enums.h"

namespace infergate {

absl::StatusOr<Precision> PrecisionFromWire(int wire, absl::string_view field) {
  const std::optional<Precision> precision = PrecisionFromProto(wire);
  if (!precision) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": unknown precision ", wire, "; expected AUTO, FP32, FP16 or BF16"));
  }
  return *precision;
}

absl::StatusOr<CheckedInferRequest> CheckInferRequest(const v1::InferRequest& request, const CodecLimits& limits) {
  RETURN_IF_ERROR(CheckTensorCount(request.inputs_size(), "inputs", limits));
  CheckedInferRequest checked;
  ASSIGN_OR_RETURN(Precision precision, PrecisionFromWire(request.precision(), "precision"));
  checked.precision = precision;
  if (request.fallback() != v1::ALLOW && request.fallback() != v1::DENY) {
    return absl::InvalidArgumentError(
        absl::StrCat("fallback: unknown policy ", request.fallback(), "; expected ALLOW or DENY"));
  }
  checked.allow_fallback = request.fallback() == v1::ALLOW;
  checked.inputs.reserve(request.inputs_size());
  for (int i = 0; i < request.inputs_size(); ++i) {
    absl::StatusOr<WireTensorInfo> info =
        ValidateWireTensor(request.inputs(i), absl::StrCat("inputs[", i, "]"), limits);
    if (!info.ok()) return info.status();
    checked.inputs.push_back(*std::move(info));
  }
  return checked;
}

}  // namespace infergate
