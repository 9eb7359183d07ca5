#pragma once
// Mapping between our DType and LibTorch's ScalarType (light c10 header only).

#include <c10/core/ScalarType.h>

#include <optional>

#include "devices/dtype.h"

namespace infergate {

// Undefined for kBytes: a string tensor is not a dtype LibTorch knows
// (scheduler/model/string_tensor.h makes them).
c10::ScalarType ToScalarType(DType dtype);
std::optional<DType> FromScalarType(c10::ScalarType type);

}  // namespace infergate
