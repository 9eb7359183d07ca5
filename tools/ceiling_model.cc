#include "tools/ceiling_model.h"

#include <ATen/ops/randn.h>

#include <exception>

#include "absl/strings/str_cat.h"
#include "model_store/torchscript_optimization.h"

namespace infergate {

absl::StatusOr<std::unique_ptr<CeilingModel>> CeilingModel::Load(const std::string& path,
                                                                  const std::vector<int64_t>& row_shape,
                                                                  int64_t max_batch) {
  if (max_batch < 1) return absl::InvalidArgumentError("max_batch: must be at least 1");
  try {
    PrepareTorchScriptRuntime();
    torch::jit::Module module = torch::jit::load(path);
    module.eval();
    c10::InferenceMode guard;
    std::vector<at::Tensor> inputs;
    for (int64_t b = 1; b <= max_batch; ++b) {
      std::vector<int64_t> shape = {b};
      shape.insert(shape.end(), row_shape.begin(), row_shape.end());
      inputs.push_back(at::randn(shape));
    }
    absl::StatusOr<OptimizedModule> optimized =
        OptimizeForInference(module, {inputs[std::min<int64_t>(1, max_batch - 1)]});
    if (optimized.ok()) module = optimized->module;
    auto model = std::unique_ptr<CeilingModel>(new CeilingModel(std::move(module), std::move(inputs)));
    // TorchScript's profiling runs, at every size a worker may run.
    for (int64_t b = 1; b <= max_batch; ++b) {
      for (int i = 0; i < 2; ++i) model->Run(b);
    }
    return model;
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", e.what()));
  }
}

void CeilingModel::Run(int64_t rows) const {
  c10::InferenceMode guard;
  module_.forward({inputs_[static_cast<size_t>(rows - 1)]});
}

}  // namespace infergate
