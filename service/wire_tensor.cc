#include "service/wire_tensor.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/model_config.h"

namespace infergate {

absl::StatusOr<WireTensorInfo> ValidateWireTensor(const v1::Tensor& wire, absl::string_view field,
                                                  const CodecLimits& limits) {
  WireTensorInfo info;
  std::optional<DType> dtype = DTypeFromProto(wire.dtype());
  if (!dtype) {
    std::string what = wire.dtype() == 0 ? "is unset" : absl::StrCat("is unknown (", wire.dtype(), ")");
    return absl::InvalidArgumentError(absl::StrCat(field, ".dtype: ", what,
                                                   "; expected one of FLOAT32, FLOAT16, BFLOAT16, FLOAT64, INT64, "
                                                   "INT32, INT8, UINT8, BOOL"));
  }
  info.dtype = *dtype;
  if (wire.shape_size() > limits.max_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".shape: rank ", wire.shape_size(), " exceeds the limit of ", limits.max_rank));
  }
  info.shape.assign(wire.shape().begin(), wire.shape().end());
  int64_t elements = 1;
  for (size_t d = 0; d < info.shape.size(); ++d) {
    if (info.shape[d] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".shape[", d, "]: ", info.shape[d], " is negative"));
    }
    if (info.shape[d] > 0 && elements > limits.max_elements / info.shape[d]) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".shape: [", absl::StrJoin(info.shape, ","),
                                                     "] has more than ", limits.max_elements, " elements"));
    }
    elements *= info.shape[d];
  }
  info.elements = elements;
  const std::string& bytes = wire.data();
  uint64_t expected = static_cast<uint64_t>(elements) * ElementSize(info.dtype);
  if (bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".data: holds ", bytes.size(), " bytes but shape [",
                                                   absl::StrJoin(info.shape, ","), "] of ", DTypeName(info.dtype),
                                                   " needs ", expected));
  }
  if (info.dtype == DType::kBool) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      auto b = static_cast<unsigned char>(bytes[i]);
      if (b > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".data: BOOL element ", i, " is ", static_cast<int>(b), "; booleans are one byte, 0 or 1"));
      }
    }
  }
  return info;
}

}  // namespace infergate
