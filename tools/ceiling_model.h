#pragma once
// The model a hand-off ceiling may run (tools/handoff_ceiling.cc): a
// TorchScript file loaded and optimized as the server serves it on the CPU
// in FP32, run on a batch of generated rows per call. With it the ceiling is
// the least a server must do to answer with that model: gRPC, the hand-off
// to a worker, and the forward pass at the batches that form, with the
// caches these share; none of infergate's serving work (decoding, admission,
// scheduling, splitting, encoding). Beside the in-process floor, which runs
// the forward back to back with nothing else on the core, it says what
// running a model between network work costs on this machine.
//
//   absl::StatusOr<std::unique_ptr<CeilingModel>> m = CeilingModel::Load(path, {256}, 64);
//   (*m)->Run(3);  // one forward pass on 3 rows
//
// Threading: Run may be called from several threads at once (a TorchScript
// module's forward is thread-safe); Load, once, before.

#include <ATen/core/Tensor.h>
#include <torch/script.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace infergate {

class CeilingModel {
 public:
  // Loads `path` (TorchScript), optimizes it as the server does (kept as
  // saved where the optimization changes its answers) and makes an input of
  // every batch size up to `max_batch`, each row of `row_shape`.
  static absl::StatusOr<std::unique_ptr<CeilingModel>> Load(const std::string& path,
                                                            const std::vector<int64_t>& row_shape,
                                                            int64_t max_batch);

  int64_t max_batch() const { return static_cast<int64_t>(inputs_.size()); }
  // One forward pass on `rows` rows (1..max_batch), under inference mode.
  void Run(int64_t rows) const;

 private:
  CeilingModel(torch::jit::Module module, std::vector<at::Tensor> inputs)
      : module_(std::move(module)), inputs_(std::move(inputs)) {}

  mutable torch::jit::Module module_;  // forward is const in use, not in type
  const std::vector<at::Tensor> inputs_;  // [b] holds b + 1 rows
};

}  // namespace infergate
