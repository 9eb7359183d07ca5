#pragma once
// Joining requests into one batch along dim 0 and handing each its rows back.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/model/tensor_types.h"

namespace infergate {

// parts[j][i] is request j's tensor for input i. Returns one tensor per input,
// the requests' rows concatenated in order. A single request is passed
// through without a copy.
std::vector<at::Tensor> ConcatBatch(const std::vector<std::vector<at::Tensor>>& parts);

// Splits each output along dim 0 into consecutive slices of `rows[j]` rows.
// Every output must have a leading dim equal to the sum of `rows`.
absl::StatusOr<std::vector<std::vector<NamedTensor>>> SplitBatch(const std::vector<NamedTensor>& outputs,
                                                                 const std::vector<int64_t>& rows);

}  // namespace infergate
