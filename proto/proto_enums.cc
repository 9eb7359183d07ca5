#include "proto/proto_enums.h"

namespace infergate {

std::optional<DType> DTypeFromProto(int wire) {
  switch (wire) {
    case v1::FLOAT32: return DType::kFloat32;
    case v1::FLOAT16: return DType::kFloat16;
    case v1::BFLOAT16: return DType::kBFloat16;
    case v1::FLOAT64: return DType::kFloat64;
    case v1::INT64: return DType::kInt64;
    case v1::INT32: return DType::kInt32;
    case v1::INT16: return DType::kInt16;
    case v1::INT8: return DType::kInt8;
    case v1::UINT8: return DType::kUInt8;
    case v1::BOOL: return DType::kBool;
    case v1::BYTES: return DType::kBytes;
    default: return std::nullopt;
  }
}

v1::DataType DTypeToProto(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return v1::FLOAT32;
    case DType::kFloat16: return v1::FLOAT16;
    case DType::kBFloat16: return v1::BFLOAT16;
    case DType::kFloat64: return v1::FLOAT64;
    case DType::kInt64: return v1::INT64;
    case DType::kInt32: return v1::INT32;
    case DType::kInt16: return v1::INT16;
    case DType::kInt8: return v1::INT8;
    case DType::kUInt8: return v1::UINT8;
    case DType::kBool: return v1::BOOL;
    case DType::kBytes: return v1::BYTES;
  }
  return v1::DATA_TYPE_UNSPECIFIED;
}

std::optional<Precision> PrecisionFromProto(int wire) {
  switch (wire) {
    case v1::AUTO: return Precision::kAuto;
    case v1::FP32: return Precision::kFp32;
    case v1::FP16: return Precision::kFp16;
    case v1::BF16: return Precision::kBf16;
    default: return std::nullopt;
  }
}

v1::Precision PrecisionToProto(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return v1::FP32;
    case Precision::kFp16: return v1::FP16;
    case Precision::kBf16: return v1::BF16;
    case Precision::kAuto: break;
  }
  return v1::AUTO;
}

}  // namespace infergate
