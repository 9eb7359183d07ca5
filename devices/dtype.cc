#include "devices/dtype.h"

#include "absl/strings/string_view.h"

namespace infergate {

size_t ElementSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
    case DType::kInt64: return 8;
    case DType::kFloat32:
    case DType::kInt32: return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16: return 2;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool: return 1;
    case DType::kBytes: return 0;
  }
  return 0;
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat64;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "FLOAT32";
    case DType::kFloat16: return "FLOAT16";
    case DType::kBFloat16: return "BFLOAT16";
    case DType::kFloat64: return "FLOAT64";
    case DType::kInt64: return "INT64";
    case DType::kInt32: return "INT32";
    case DType::kInt16: return "INT16";
    case DType::kInt8: return "INT8";
    case DType::kUInt8: return "UINT8";
    case DType::kBool: return "BOOL";
    case DType::kBytes: return "BYTES";
  }
  return "UNKNOWN";
}

absl::string_view ProtocolDatatypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "FP32";
    case DType::kFloat16: return "FP16";
    case DType::kBFloat16: return "BF16";
    case DType::kFloat64: return "FP64";
    case DType::kInt64: return "INT64";
    case DType::kInt32: return "INT32";
    case DType::kInt16: return "INT16";
    case DType::kInt8: return "INT8";
    case DType::kUInt8: return "UINT8";
    case DType::kBool: return "BOOL";
    case DType::kBytes: return "BYTES";
  }
  return "INVALID";
}

}  // namespace infergate
