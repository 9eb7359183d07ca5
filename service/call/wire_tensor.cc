#include "service/call/wire_tensor.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/wire_strings.h"
#include "proto/proto_enums.h"

namespace infergate {

absl::StatusOr<int64_t> ValidateShape(const std::vector<int64_t>& shape, absl::string_view field,
                                      const CodecLimits& limits) {
  if (static_cast<int64_t>(shape.size()) > limits.max_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".shape: rank ", shape.size(), " exceeds the limit of ", limits.max_rank));
  }
  const int64_t max_elements = std::min(limits.max_elements, CodecLimits::kElementsCeiling);
  int64_t nonzero_product = 1;
  bool has_zero = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".shape[", d, "]: ", shape[d], " is negative"));
    }
    if (shape[d] == 0) {
      has_zero = true;
      continue;
    }
    if (nonzero_product > max_elements / shape[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".shape: [", absl::StrJoin(shape, ","), "] has more than ", max_elements, " elements"));
    }
    nonzero_product *= shape[d];
  }
  return has_zero ? 0 : nonzero_product;
}

absl::Status CheckShapeFitsInt64(const std::vector<int64_t>& shape, size_t element_size, absl::string_view input) {
  int64_t product = 1;
  // A negative dim is ValidateShape's to refuse; a zero one means no
  // elements, whatever the rest.
  for (int64_t d : shape) {
    if (d <= 0) return absl::OkStatus();
  }
  for (int64_t d : shape) {
    if (product > INT64_MAX / d) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid shape for input '", input, "': shape [", absl::StrJoin(shape, ","),
                       "] causes total element count to exceed maximum size of ", INT64_MAX));
    }
    product *= d;
  }
  if (element_size > 1 && product > INT64_MAX / static_cast<int64_t>(element_size)) {
    return absl::InvalidArgumentError(absl::StrCat("byte size overflow for input '", input, "': element count (",
                                                   product, ") * data type size (", element_size,
                                                   ") exceeds maximum allowed size (", INT64_MAX, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateRawBytes(DType dtype, int64_t elements, const std::vector<int64_t>& shape, absl::string_view bytes,
                              absl::string_view data_field) {
  if (dtype == DType::kBytes) return ParseSerializedStrings(bytes, elements, data_field).status();
  uint64_t expected = static_cast<uint64_t>(elements) * ElementSize(dtype);
  if (bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(data_field, ": holds ", bytes.size(), " bytes but shape [",
                                                   absl::StrJoin(shape, ","), "] of ", DTypeName(dtype), " needs ",
                                                   expected));
  }
  if (dtype == DType::kBool) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      auto b = static_cast<unsigned char>(bytes[i]);
      if (b > 1) {
        return absl::InvalidArgumentError(absl::StrCat(data_field, ": BOOL element ", i, " is ", static_cast<int>(b),
                                                       "; booleans are one byte, 0 or 1"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<WireTensorInfo> ValidateWireTensor(const v1::Tensor& wire, absl::string_view field,
                                                  const CodecLimits& limits) {
  WireTensorInfo info;
  std::optional<DType> dtype = DTypeFromProto(wire.dtype());
  if (!dtype) {
    std::string what = wire.dtype() == 0 ? "is unset" : absl::StrCat("is unknown (", wire.dtype(), ")");
    return absl::InvalidArgumentError(absl::StrCat(field, ".dtype: ", what,
                                                   "; expected one of FLOAT32, FLOAT16, BFLOAT16, FLOAT64, INT64, "
                                                   "INT32, INT16, INT8, UINT8, BOOL, BYTES"));
  }
  info.dtype = *dtype;
  info.shape.assign(wire.shape().begin(), wire.shape().end());
  ASSIGN_OR_RETURN(int64_t elements, ValidateShape(info.shape, field, limits));
  info.elements = elements;
  RETURN_IF_ERROR(ValidateRawBytes(info.dtype, info.elements, info.shape, wire.data(), absl::StrCat(field, ".data")));
  return info;
}

absl::Status CheckTensorCount(int64_t count, absl::string_view field, const CodecLimits& limits) {
  if (count <= limits.max_tensors) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", count, " tensors; a request may carry at most ", limits.max_tensors));
}

}  // namespace infergate
