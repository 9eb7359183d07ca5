#include "scheduler/loaders/load_servable.h"

#include "common/status_macros.h"
#include "scheduler/loaders/aoti/aoti_model.h"
#include "scheduler/loaders/torchscript/torchscript_model.h"
#include "scheduler/model/simulated_servable.h"

namespace infergate {

absl::StatusOr<std::shared_ptr<Servable>> LoadServable(const std::string& path, const v1::ModelConfig& config,
                                                       const DeviceInfo& device, DType compute_dtype,
                                                       const AdmitBytes& admit, int instances,
                                                       const HostCopyUse& host) {
  std::shared_ptr<Servable> loaded;
  if (IsAotiPackagePath(path)) {
    ASSIGN_OR_RETURN(loaded, AotiModel::Load(path, config, device, compute_dtype, admit, instances));
  } else {
    ASSIGN_OR_RETURN(loaded, TorchScriptModel::Load(path, config, device, compute_dtype, admit, host));
  }
  return SimulatedServable::Wrap(std::move(loaded), device, config.name(), path);
}

}  // namespace infergate
