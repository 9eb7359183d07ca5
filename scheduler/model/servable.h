#pragma once
// A model ready to run on one device in one compute dtype. The scheduler
// sees models only through this interface: TorchScript models implement it
// (TorchScriptModel), and tests supply fakes that need no model file.
//
// Thread-safety: Run may be called from several worker threads at once.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devices/device_info.h"
#include "devices/dtype.h"
#include "infergate/v1/model_config.pb.h"
#include "scheduler/model/tensor_types.h"
#include "scheduler/repository/input_signature.h"

namespace infergate {

class Servable {
 public:
  virtual ~Servable() = default;

  // Runs on inputs already ordered as signature(). Outputs come back on the
  // CPU, contiguous. A failure the device raised (unsupported op, dtype, out
  // of memory, device error) carries a DeviceFailure payload; any other
  // failure is the model's own and goes to the client as it is.
  virtual absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<at::Tensor>& inputs) const = 0;
  // The warm-up run (ModelManager::WarmUp): as Run, but on every instance
  // of a servable that holds several (aoti_model.h), one after another, so
  // no request pays for an instance's first run. The first run's answer.
  virtual absl::StatusOr<std::vector<NamedTensor>> WarmUp(const std::vector<at::Tensor>& inputs) const {
    return Run(inputs);
  }

  virtual const InputSignature& signature() const = 0;
  virtual DType compute_dtype() const = 0;
  // Device memory the model holds while resident (what cache budgets count).
  virtual uint64_t resident_bytes() const = 0;
  // How long its weights took to reach the device when it was loaded:
  // measured, or a simulated device's charged cost (simulation.h); zero
  // when nothing moved (the CPU) or the loader could not tell.
  virtual std::chrono::microseconds transfer_time() const { return std::chrono::microseconds(0); }
};

// Given to a loader by the model cache. The loader calls it once it knows
// the bytes the model's parameters and buffers will take on the device and
// before it places any there; the cache makes room for them (evicting idle
// models) or answers RESOURCE_EXHAUSTED, which the loader returns as is. A
// loader that never calls it is admitted by the size it reports afterwards.
using AdmitBytes = std::function<absl::Status(uint64_t parameter_bytes)>;

// Loads the model file at `path` for `device` in `compute_dtype`. Runs on a
// device worker (or the starting thread for warm-up); may take seconds.
using ServableLoader = std::function<absl::StatusOr<std::shared_ptr<Servable>>(
    const std::string& path, const v1::ModelConfig& config, const DeviceInfo& device, DType compute_dtype,
    const AdmitBytes& admit)>;

}  // namespace infergate
