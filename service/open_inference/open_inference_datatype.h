#pragma once
// The Open Inference Protocol's datatype names ("FP32", "INT64", ...) and
// model-config enum for the dtypes infergate carries. No LibTorch, so the
// REST codec and the fuzzer share it.

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "devices/dtype.h"
#include "inference/grpc_service.pb.h"

namespace infergate {

// "FP32", "INT64", ... for the datatypes infergate carries.
absl::string_view DatatypeName(DType dtype);
// nullopt for BYTES, UINT16..64 and anything unknown.
std::optional<DType> KnownDatatype(absl::string_view name);
// The same, with INVALID_ARGUMENT naming `field` for what is not served.
absl::StatusOr<DType> DatatypeFromName(absl::string_view name, absl::string_view field);
// The model-config enum (TYPE_FP32, ...).
inference::DataType ConfigDatatype(DType dtype);

}  // namespace infergate
