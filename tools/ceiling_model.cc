#include "tools/ceiling_model.h"

#include <ATen/ops/randn.h>
#include <c10/core/InferenceMode.h>

#include "tools/served_torchscript.h"

namespace infergate {

absl::StatusOr<std::unique_ptr<CeilingModel>> CeilingModel::Load(const std::string& path,
                                                                 const std::vector<int64_t>& row_shape,
                                                                 int64_t max_batch) {
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> served =
      LoadServedTorchScript(path, row_shape, v1::FLOAT32, max_batch, /*optimize=*/true);
  if (!served.ok()) return served.status();
  std::vector<at::Tensor> inputs;
  {
    c10::InferenceMode guard;
    for (int64_t b = 1; b <= max_batch; ++b) {
      std::vector<int64_t> shape = {b};
      shape.insert(shape.end(), row_shape.begin(), row_shape.end());
      inputs.push_back(at::randn(shape));
    }
  }
  // TorchScript's profiling runs, at every size a worker may run; a model
  // that cannot run on these inputs is refused here, not in the measurement.
  for (const at::Tensor& x : inputs) {
    for (int i = 0; i < 2; ++i) {
      if (auto run = (*served)->Run({x}); !run.ok()) return run.status();
    }
  }
  return std::unique_ptr<CeilingModel>(new CeilingModel(*std::move(served), std::move(inputs)));
}

void CeilingModel::Run(int64_t rows) const {
  // The outputs are dropped: the ceiling answers with empty responses.
  (void)model_->Run({inputs_[static_cast<size_t>(rows - 1)]});
}

}  // namespace infergate
