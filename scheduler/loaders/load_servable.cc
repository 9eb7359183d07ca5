#include "scheduler/loaders/load_servable.h"

#include "scheduler/loaders/aoti/aoti_model.h"
#include "scheduler/loaders/torchscript/torchscript_model.h"

namespace infergate {

absl::StatusOr<std::shared_ptr<Servable>> LoadServable(const std::string& path, const v1::ModelConfig& config,
                                                       const DeviceInfo& device, DType compute_dtype,
                                                       const AdmitBytes& admit, int instances) {
  if (IsAotiPackagePath(path)) {
    absl::StatusOr<std::shared_ptr<AotiModel>> package =
        AotiModel::Load(path, config, device, compute_dtype, admit, instances);
    if (!package.ok()) return package.status();
    return std::shared_ptr<Servable>(*std::move(package));
  }
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> model =
      TorchScriptModel::Load(path, config, device, compute_dtype, admit);
  if (!model.ok()) return model.status();
  return std::shared_ptr<Servable>(*std::move(model));
}

}  // namespace infergate
