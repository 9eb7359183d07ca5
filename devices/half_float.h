#pragma once
// IEEE half and bfloat16 <-> float, rounding to nearest even: the wire
// forms of FP16 and BF16 tensors read from and written as JSON numbers.
// Pure functions; thread-safe.

#include <cstdint>

namespace infergate {

uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);
float BFloat16ToFloat(uint16_t bits);

}  // namespace infergate
