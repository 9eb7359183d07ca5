#include "devices/torch_dtype.h"

namespace infergate {

c10::ScalarType ToScalarType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return c10::ScalarType::Float;
    case DType::kFloat16: return c10::ScalarType::Half;
    case DType::kBFloat16: return c10::ScalarType::BFloat16;
    case DType::kFloat64: return c10::ScalarType::Double;
    case DType::kInt64: return c10::ScalarType::Long;
    case DType::kInt32: return c10::ScalarType::Int;
    case DType::kInt16: return c10::ScalarType::Short;
    case DType::kInt8: return c10::ScalarType::Char;
    case DType::kUInt8: return c10::ScalarType::Byte;
    case DType::kBool: return c10::ScalarType::Bool;
    case DType::kBytes: break;  // string tensors are made by string_tensor.h, never by dtype
  }
  return c10::ScalarType::Undefined;
}

std::optional<DType> FromScalarType(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return DType::kFloat32;
    case c10::ScalarType::Half: return DType::kFloat16;
    case c10::ScalarType::BFloat16: return DType::kBFloat16;
    case c10::ScalarType::Double: return DType::kFloat64;
    case c10::ScalarType::Long: return DType::kInt64;
    case c10::ScalarType::Int: return DType::kInt32;
    case c10::ScalarType::Short: return DType::kInt16;
    case c10::ScalarType::Char: return DType::kInt8;
    case c10::ScalarType::Byte: return DType::kUInt8;
    case c10::ScalarType::Bool: return DType::kBool;
    default: return std::nullopt;
  }
}

}  // namespace infergate
