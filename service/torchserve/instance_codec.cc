#include "service/torchserve/instance_codec.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "devices/torch_dtype.h"
#include "scheduler/model/string_tensor.h"

namespace infergate {
namespace {

// The shape of `value`: list lengths along its first elements.
absl::StatusOr<std::vector<int64_t>> ShapeOf(const nlohmann::json& value, absl::string_view where,
                                             const CodecLimits& limits) {
  std::vector<int64_t> shape;
  const nlohmann::json* at = &value;
  while (at->is_array()) {
    if (static_cast<int>(shape.size()) >= limits.max_rank) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": nests deeper than ", limits.max_rank, " lists"));
    }
    shape.push_back(static_cast<int64_t>(at->size()));
    if (at->empty()) break;
    at = &(*at)[0];
  }
  return shape;
}

// Whether `v` fits `dtype` exactly enough: integers for integer dtypes in
// their range, 0/1/true/false for bool.
absl::Status CheckValue(const nlohmann::json& v, DType dtype, const std::string& where) {
  if (!v.is_number() && !v.is_boolean()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": expected a number, got ", v.type_name()));
  }
  if (dtype == DType::kBool) {
    if (v.is_boolean() || (v.is_number_integer() && (v.get<int64_t>() == 0 || v.get<int64_t>() == 1))) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(where, ": expected true or false for a BOOL input"));
  }
  if (IsFloatingPoint(dtype)) return absl::OkStatus();
  if (v.is_number_float()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", v.dump(), " is not a whole number, and the input is ", DTypeName(dtype)));
  }
  return absl::OkStatus();
}

// The range of whole numbers `dtype` holds (integers and bool).
std::pair<int64_t, int64_t> RangeOf(DType dtype) {
  switch (dtype) {
    case DType::kInt32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case DType::kInt16: return {std::numeric_limits<int16_t>::min(), std::numeric_limits<int16_t>::max()};
    case DType::kInt8: return {-128, 127};
    case DType::kUInt8: return {0, 255};
    case DType::kBool: return {0, 1};
    default: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

// `value` is a list as long as the first one at this depth (shape[depth]).
absl::Status CheckListAtDepth(const nlohmann::json& value, const std::vector<int64_t>& shape, size_t depth,
                              const std::string& where) {
  if (value.is_array() && static_cast<int64_t>(value.size()) == shape[depth]) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": expected a list of ", shape[depth], " like the first at this depth, got ",
                   value.is_array() ? absl::StrCat("a list of ", value.size()) : std::string(value.type_name())));
}

// Collects the leaves of `value` in row-major order: as doubles for a
// floating-point dtype, else as whole numbers checked against its range.
absl::Status Collect(const nlohmann::json& value, const std::vector<int64_t>& shape, size_t depth, DType dtype,
                     const std::string& where, std::vector<double>& reals, std::vector<int64_t>& wholes) {
  if (depth == shape.size()) {
    RETURN_IF_ERROR(CheckValue(value, dtype, where));
    if (IsFloatingPoint(dtype)) {
      reals.push_back(value.is_boolean() ? (value.get<bool>() ? 1.0 : 0.0) : value.get<double>());
      return absl::OkStatus();
    }
    const int64_t n = value.is_boolean() ? (value.get<bool>() ? 1 : 0)
                      : value.is_number_unsigned() && value.get<uint64_t>() > uint64_t{INT64_MAX}
                          ? std::numeric_limits<int64_t>::max()
                          : value.get<int64_t>();
    const auto [lo, hi] = RangeOf(dtype);
    if (n < lo || n > hi || (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t{INT64_MAX})) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", value.dump(), " does not fit ", DTypeName(dtype)));
    }
    wholes.push_back(n);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckListAtDepth(value, shape, depth, where));
  for (size_t i = 0; i < value.size(); ++i) {
    absl::Status s = Collect(value[i], shape, depth + 1, dtype, absl::StrCat(where, "[", i, "]"), reals, wholes);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// Collects the strings of `value` in row-major order (a BYTES input).
absl::Status CollectStrings(const nlohmann::json& value, const std::vector<int64_t>& shape, size_t depth,
                            const std::string& where, std::vector<std::string>& strings) {
  if (depth == shape.size()) {
    if (!value.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected a string for a BYTES input, got ", value.type_name()));
    }
    strings.push_back(value.get<std::string>());
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckListAtDepth(value, shape, depth, where));
  for (size_t i = 0; i < value.size(); ++i) {
    absl::Status s = CollectStrings(value[i], shape, depth + 1, absl::StrCat(where, "[", i, "]"), strings);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// A string tensor's elements as nested lists of JSON strings (bytes that
// are not UTF-8 become U+FFFD when written).
nlohmann::json StringValues(const std::vector<absl::string_view>& strings, const std::vector<int64_t>& shape,
                            size_t depth, size_t& at) {
  if (depth == shape.size()) return std::string(strings[at++]);
  nlohmann::json list = nlohmann::json::array();
  for (int64_t i = 0; i < shape[depth]; ++i) list.push_back(StringValues(strings, shape, depth + 1, at));
  return list;
}

template <typename T>
nlohmann::json Values(const T* data, const std::vector<int64_t>& shape, size_t depth, int64_t& at) {
  if (depth == shape.size()) {
    const T v = data[at++];
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(v)) return nullptr;
    }
    return v;
  }
  nlohmann::json list = nlohmann::json::array();
  for (int64_t i = 0; i < shape[depth]; ++i) list.push_back(Values(data, shape, depth + 1, at));
  return list;
}

}  // namespace

absl::StatusOr<at::Tensor> InstanceTensor(const nlohmann::json& value, DType dtype, absl::string_view where,
                                          const CodecLimits& limits) {
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, ShapeOf(value, where, limits));
  RETURN_IF_ERROR(ValidateShape(shape, where, limits).status());
  if (dtype == DType::kBytes) {
    std::vector<std::string> strings;
    RETURN_IF_ERROR(CollectStrings(value, shape, 0, std::string(where), strings));
    return MakeStringTensor(std::move(strings), shape);
  }
  std::vector<double> reals;
  std::vector<int64_t> wholes;
  RETURN_IF_ERROR(Collect(value, shape, 0, dtype, std::string(where), reals, wholes));
  at::Tensor out = IsFloatingPoint(dtype) ? at::tensor(reals, at::TensorOptions().dtype(at::kDouble))
                                          : at::tensor(wholes, at::TensorOptions().dtype(at::kLong));
  out = out.reshape(shape).to(ToScalarType(dtype));
  return out;
}

absl::StatusOr<at::Tensor> StackInstances(const std::vector<at::Tensor>& rows, size_t first, size_t count,
                                          absl::string_view field) {
  std::vector<at::Tensor> chunk(rows.begin() + first, rows.begin() + first + count);
  for (size_t i = 1; i < chunk.size(); ++i) {
    if (!chunk[i].sizes().equals(chunk[0].sizes())) {
      return absl::InvalidArgumentError(absl::StrCat(field, "[", first + i, "]: its shape differs from ", field, "[",
                                                     first, "]'s; every instance of a batch must have the same shape"));
    }
  }
  if (IsStringTensor(chunk[0])) {
    for (at::Tensor& t : chunk) t = t.unsqueeze(0);  // a view: still the strings
    return JoinStringTensors(chunk);
  }
  return at::stack(chunk);
}

nlohmann::json TensorJson(const at::Tensor& tensor) {
  if (IsStringTensor(tensor)) {
    size_t at = 0;
    return StringValues(StringElements(tensor), tensor.sizes().vec(), 0, at);
  }
  at::Tensor t = tensor.contiguous();
  const std::vector<int64_t> shape = t.sizes().vec();
  int64_t at = 0;
  switch (t.scalar_type()) {
    case at::kFloat: return Values(t.data_ptr<float>(), shape, 0, at);
    case at::kDouble: return Values(t.data_ptr<double>(), shape, 0, at);
    case at::kLong: return Values(t.data_ptr<int64_t>(), shape, 0, at);
    case at::kInt: return Values(t.data_ptr<int32_t>(), shape, 0, at);
    case at::kShort: return Values(t.data_ptr<int16_t>(), shape, 0, at);
    case at::kChar: return Values(t.data_ptr<int8_t>(), shape, 0, at);
    case at::kByte: return Values(t.data_ptr<uint8_t>(), shape, 0, at);
    case at::kBool: return Values(t.data_ptr<bool>(), shape, 0, at);
    default: {
      at::Tensor f = t.to(at::kFloat);
      return Values(f.data_ptr<float>(), shape, 0, at);
    }
  }
}

nlohmann::json PredictionJson(const std::vector<NamedTensor>& outputs, int64_t row) {
  auto part = [row](const at::Tensor& t) {
    return TensorJson(row >= 0 && t.dim() > 0 && row < t.size(0) ? t[row] : t);
  };
  if (outputs.size() == 1) return part(outputs[0].tensor);
  nlohmann::json out = nlohmann::json::object();
  for (const NamedTensor& o : outputs) out[o.name] = part(o.tensor);
  return out;
}

}  // namespace infergate
