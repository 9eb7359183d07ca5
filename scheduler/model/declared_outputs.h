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
// A List[str] result (a string tensor of one dimension, string_tensor.h)
// takes the declared output's shape: the batch's rows first where the
// model batches, then the declared dims, one -1 among them standing for
// what the list's length leaves; undeclared, [rows, length / rows] for a
// batch and [length] otherwise. A string output declared as another
// dtype, or a tensor declared TYPE_STRING, is INTERNAL.
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
  // positional output). `batch_rows`: the rows of the batch it ran on
  // where the model batches, else 0. Runs LibTorch conversions: call
  // inside the caller's exception handling.
  absl::StatusOr<std::vector<NamedTensor>> ToAnswer(const std::string& model,
                                                    std::vector<std::pair<std::string, at::Tensor>> raw,
                                                    int64_t batch_rows = 0) const;

 private:
  // The shape of string output `slot` (names_.size() when undeclared) of
  // `elements` strings.
  absl::StatusOr<std::vector<int64_t>> StringShape(const std::string& model, const std::string& name, size_t slot,
                                                   int64_t elements, int64_t batch_rows) const;

  std::vector<std::string> names_;
  std::vector<std::optional<DType>> dtypes_;
  std::vector<std::vector<int64_t>> dims_;  // as declared, without the batch dim
};

}  // namespace infergate
