#pragma once
// What inputs a model takes, and matching a request's tensors against that.
// Free of LibTorch so it can be checked before a model is even loaded.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "devices/dtype.h"

namespace infergate {

struct InputSpec {
  std::string name;
  std::optional<DType> dtype;                // unknown when the config is silent
  std::optional<std::vector<int64_t>> dims;  // without the batch dim; -1 = any
};

struct InputSignature {
  std::vector<InputSpec> inputs;  // in forward() argument order
  uint32_t max_batch_size = 0;    // > 0: every input has a leading batch dim
};

// The parts of a request tensor that matching looks at.
struct TensorMeta {
  absl::string_view name;
  DType dtype;
  std::span<const int64_t> shape;
};

// For each signature input, the index of the request tensor that feeds it.
// Tensors match by name; when every request tensor is unnamed they match by
// position. Errors are INVALID_ARGUMENT in Triton's words (clients match on
// them: "unexpected shape for input 'x' for model 'm'. Expected [-1,16],
// got [1,15]"), then, in parentheses, the field at fault
// ("inputs[1].shape[0]") and why.
absl::StatusOr<std::vector<size_t>> MatchInputs(const InputSignature& signature, std::span<const TensorMeta> tensors,
                                                absl::string_view model);

// Rows in the request (leading dim) for a batchable model, else 1.
int64_t BatchRows(const InputSignature& signature, std::span<const TensorMeta> tensors);

}  // namespace infergate
