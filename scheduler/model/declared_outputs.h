#pragma once
// How a model's outputs become an answer's tensors under its config, the
// same for every kind of model file:
//   declared outputs   name the outputs in order, or by key for a model
//                      that returns them by key, and set their dtype; the
//                      count must match
//   none declared      positional outputs are named output<N>; floating
//                      ones come back as float32
// Every tensor comes back on the CPU, contiguous, in a dtype the wire API
// carries; anything else is INTERNAL naming the model and the output.
//
// Immutable after construction; thread-safe.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "devices/dtype.h"
#include "infergate/v1/model_config.pb.h"
#include "scheduler/model/tensor_types.h"

namespace infergate {

class DeclaredOutputs {
 public:
  explicit DeclaredOutputs(const v1::ModelConfig& config);

  // `raw`: what the model returned, each with its key (empty for a
  // positional output). Runs LibTorch conversions: call inside the
  // caller's exception handling.
  absl::StatusOr<std::vector<NamedTensor>> ToAnswer(const std::string& model,
                                                    std::vector<std::pair<std::string, at::Tensor>> raw) const;

 private:
  std::vector<std::string> names_;
  std::vector<std::optional<DType>> dtypes_;
};

}  // namespace infergate
