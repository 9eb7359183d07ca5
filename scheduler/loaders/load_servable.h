#pragma once
// The one place a model file's format picks its loader: an AOTInductor
// package (.pt2) is opened by AotiModel::Load, anything else is read as
// TorchScript by TorchScriptModel::Load. On a simulated accelerator either
// is wrapped in a SimulatedServable, which charges what the device would
// (memory, the move, the backend's rules). The model cache loads through
// this (ModelManager's default ServableLoader); tests give the cache loaders
// of their own instead.
//
// A pure dispatch: thread-safe as the loaders are; it runs on the thread
// that loads (a device worker, or the starting thread for warm-up).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "devices/device_info.h"
#include "devices/dtype.h"
#include "infergate/v1/model_config.pb.h"
#include "scheduler/model/host_copy_store.h"
#include "scheduler/model/servable.h"

namespace infergate {

// The model file at `path` loaded for `device` in `compute_dtype`, admitted
// through `admit` (servable.h). `instances`: how many batches may run at
// once on the device, the model instances a .pt2 package is opened with
// (TorchScript runs any number at once on one copy). `host`: the file's
// host copy to start from or keep (host_copy_store.h); TorchScript only,
// an AOTInductor package is always read from its file.
absl::StatusOr<std::shared_ptr<Servable>> LoadServable(const std::string& path, const v1::ModelConfig& config,
                                                       const DeviceInfo& device, DType compute_dtype,
                                                       const AdmitBytes& admit, int instances,
                                                       const HostCopyUse& host = {});

}  // namespace infergate
