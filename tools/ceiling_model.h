#pragma once
// The model a hand-off ceiling may run (tools/handoff_ceiling.cc): a
// TorchScript file loaded through the server's own servable, as the server
// serves it on the CPU in FP32 (tools/served_torchscript.h), run on a batch
// of generated rows per call. With it the ceiling is
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

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/loaders/torchscript/torchscript_model.h"

namespace infergate {

class CeilingModel {
 public:
  // Loads `path` (TorchScript) as the server does (optimized for inference
  // unless that changes its answers) and makes an input of every batch size
  // up to `max_batch`, each row of `row_shape`.
  static absl::StatusOr<std::unique_ptr<CeilingModel>> Load(const std::string& path,
                                                            const std::vector<int64_t>& row_shape, int64_t max_batch);

  int64_t max_batch() const { return static_cast<int64_t>(inputs_.size()); }
  // One run of the servable on `rows` rows (1..max_batch): the forward pass
  // and its outputs made ready to encode, as a worker runs a batch.
  void Run(int64_t rows) const;

 private:
  CeilingModel(std::shared_ptr<const TorchScriptModel> model, std::vector<at::Tensor> inputs)
      : model_(std::move(model)), inputs_(std::move(inputs)) {}

  const std::shared_ptr<const TorchScriptModel> model_;
  const std::vector<at::Tensor> inputs_;  // [b] holds b + 1 rows
};

}  // namespace infergate
