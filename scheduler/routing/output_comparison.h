#pragma once
// Measures how far a candidate run's outputs are from the reference run's
// (FP32 on the CPU): per output, the largest absolute difference, the
// reference's largest magnitude, and NaN or inf the reference did not have.
// The verdict on the figures is accuracy_tolerance.h's.

#include <vector>

#include "scheduler/model/accuracy_tolerance.h"
#include "scheduler/model/tensor_types.h"

namespace infergate {

// Outputs pair up by name; a missing output or another shape is the
// measurement's problem. Figures are computed in float64.
AccuracyMeasurement CompareOutputs(const std::vector<NamedTensor>& reference,
                                   const std::vector<NamedTensor>& candidate);

}  // namespace infergate
