#pragma once
// Mapping between our DType and LibTorch's ScalarType (light c10 header only).

#include <optional>

#include <c10/core/ScalarType.h>

#include "devices/dtype.h"

namespace infergate {

c10::ScalarType ToScalarType(DType dtype);
std::optional<DType> FromScalarType(c10::ScalarType type);

}  // namespace infergate
