#pragma once
// Element types the server understands, independent of protobuf and LibTorch.

#include <cstddef>
#include <optional>

#include "absl/strings/string_view.h"

namespace infergate {

enum class DType {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt64,
  kInt32,
  kInt16,
  kInt8,
  kUInt8,
  kBool,
  // Strings (Triton's TYPE_STRING, BYTES on the wire): a tensor whose
  // elements are byte strings of any length. Never a compute dtype, so not
  // in kAllDTypes; inside the server a CPU tensor of references
  // (scheduler/model/string_tensor.h), the strings staying on the host.
  kBytes,
};

inline constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                       DType::kInt64,   DType::kInt32,   DType::kInt16,    DType::kInt8,
                                       DType::kUInt8,   DType::kBool};

// Bytes per element; 0 for kBytes, whose elements vary in size.
size_t ElementSize(DType dtype);
bool IsFloatingPoint(DType dtype);
// Upper-case wire name, e.g. "FLOAT32".
absl::string_view DTypeName(DType dtype);
// The Open Inference Protocol's (and Triton's) name, e.g. "FP32", "BYTES".
absl::string_view ProtocolDatatypeName(DType dtype);

}  // namespace infergate
