#include "service/open_inference/open_inference_datatype.h"

#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

constexpr struct {
  DType dtype;
  const char* name;
  inference::DataType config;
} kDatatypes[] = {
    {DType::kBool, "BOOL", inference::TYPE_BOOL},       {DType::kUInt8, "UINT8", inference::TYPE_UINT8},
    {DType::kInt8, "INT8", inference::TYPE_INT8},       {DType::kInt16, "INT16", inference::TYPE_INT16},
    {DType::kInt32, "INT32", inference::TYPE_INT32},    {DType::kInt64, "INT64", inference::TYPE_INT64},
    {DType::kFloat16, "FP16", inference::TYPE_FP16},    {DType::kBFloat16, "BF16", inference::TYPE_BF16},
    {DType::kFloat32, "FP32", inference::TYPE_FP32},    {DType::kFloat64, "FP64", inference::TYPE_FP64},
};

}  // namespace

absl::string_view DatatypeName(DType dtype) {
  for (const auto& d : kDatatypes) {
    if (d.dtype == dtype) return d.name;
  }
  return "INVALID";
}

inference::DataType ConfigDatatype(DType dtype) {
  for (const auto& d : kDatatypes) {
    if (d.dtype == dtype) return d.config;
  }
  return inference::TYPE_INVALID;
}

std::optional<DType> KnownDatatype(absl::string_view name) {
  for (const auto& d : kDatatypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

absl::StatusOr<DType> DatatypeFromName(absl::string_view name, absl::string_view field) {
  if (std::optional<DType> known = KnownDatatype(name)) return *known;
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": '", name.substr(0, 32), "' is not a datatype infergate serves; expected one of ",
      "BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, BF16, FP32, FP64"));
}

}  // namespace infergate
