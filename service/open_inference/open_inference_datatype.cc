#include "service/open_inference/open_inference_datatype.h"

#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

// Every dtype the protocol carries, with its model-config type.
constexpr struct {
  DType dtype;
  inference::DataType config;
} kDatatypes[] = {
    {DType::kBool, inference::TYPE_BOOL},    {DType::kUInt8, inference::TYPE_UINT8},
    {DType::kInt8, inference::TYPE_INT8},    {DType::kInt16, inference::TYPE_INT16},
    {DType::kInt32, inference::TYPE_INT32},  {DType::kInt64, inference::TYPE_INT64},
    {DType::kFloat16, inference::TYPE_FP16}, {DType::kBFloat16, inference::TYPE_BF16},
    {DType::kFloat32, inference::TYPE_FP32}, {DType::kFloat64, inference::TYPE_FP64},
    {DType::kBytes, inference::TYPE_STRING},
};

}  // namespace

absl::string_view DatatypeName(DType dtype) { return ProtocolDatatypeName(dtype); }

inference::DataType ConfigDatatype(DType dtype) {
  for (const auto& d : kDatatypes) {
    if (d.dtype == dtype) return d.config;
  }
  return inference::TYPE_INVALID;
}

std::optional<DType> KnownDatatype(absl::string_view name) {
  for (const auto& d : kDatatypes) {
    if (name == ProtocolDatatypeName(d.dtype)) return d.dtype;
  }
  return std::nullopt;
}

absl::StatusOr<DType> DatatypeFromName(absl::string_view name, absl::string_view field) {
  if (std::optional<DType> known = KnownDatatype(name)) return *known;
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": '", name.substr(0, 32), "' is not a datatype infergate serves; expected one of ",
                   "BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, BF16, FP32, FP64, BYTES"));
}

}  // namespace infergate
