#include "scheduler/model/simulated_servable.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/thread_cpu_time.h"
#include "devices/device_failure.h"
#include "devices/dtype.h"
#include "devices/simulated_run.h"
#include "scheduler/model/inference_types.h"

namespace infergate {

absl::StatusOr<std::shared_ptr<Servable>> SimulatedServable::Wrap(std::shared_ptr<Servable> inner,
                                                                  const DeviceInfo& device, const std::string& model,
                                                                  const std::string& file) {
  if (!device.simulation || device.id.kind == DeviceKind::kCpu) return inner;
  const SimulationRules& rules = *device.simulation;
  const uint64_t bytes = inner->resident_bytes();
  uint64_t reserved = 0;
  if (rules.memory) {
    const MemoryLedger& ledger = *rules.memory;
    if (!rules.memory->TryReserve(bytes)) {
      return WithDeviceFailure(absl::ResourceExhaustedError(absl::StrCat(
                                   "model '", model, "': ", device.id.kind == DeviceKind::kCuda ? "CUDA" : "MPS",
                                   " out of memory. Tried to allocate ", bytes, " bytes for the parameters of '", model,
                                   "' (", device.id.ToString(), "; ", ledger.capacity(), " bytes total capacity; ",
                                   ledger.used(), " bytes already allocated; simulated device)")),
                               DeviceFailure::kOutOfMemory, "");
    }
    reserved = bytes;
  }
  const std::chrono::microseconds moved = SimulatedMove(rules, bytes);
  const std::chrono::microseconds transfer_time = inner->transfer_time() + moved;
  std::string work_key = absl::StrCat(file.empty() ? model : file, "/", DTypeName(inner->compute_dtype()));
  return std::shared_ptr<Servable>(
      new SimulatedServable(std::move(inner), device.simulation, reserved, transfer_time, std::move(work_key)));
}

SimulatedServable::SimulatedServable(std::shared_ptr<Servable> inner, std::shared_ptr<const SimulationRules> rules,
                                     uint64_t reserved_bytes, std::chrono::microseconds transfer_time,
                                     std::string work_key)
    : inner_(std::move(inner)),
      rules_(std::move(rules)),
      reserved_bytes_(reserved_bytes),
      transfer_time_(transfer_time),
      work_key_(std::move(work_key)) {}

SimulatedServable::~SimulatedServable() {
  if (rules_->memory) rules_->memory->Release(reserved_bytes_);
}

template <typename RunInner>
absl::StatusOr<std::vector<NamedTensor>> SimulatedServable::Watched(const std::vector<at::Tensor>& inputs,
                                                                    RunInner run) const {
  // The loader's DeviceComputeScope around its forward pass applies the
  // rules and fails the run as the backend would.
  SimulationRulesForThisThread rules(rules_.get());
  const Clock::time_point started = Clock::now();
  const uint64_t cpu_started = ThreadCpuMicros();
  absl::StatusOr<std::vector<NamedTensor>> outputs = run();
  if (rules_->compute_scale > 0 && outputs.ok()) {
    const uint64_t work_us =
        at::get_num_threads() == 1 ? ThreadCpuMicros() - cpu_started : MicrosBetween(started, Clock::now());
    const int64_t rows = !inputs.empty() && inputs[0].dim() > 0 ? inputs[0].size(0) : 0;
    std::this_thread::sleep_until(started + ComputeTime(rows, work_us));
  }
  return outputs;
}

std::chrono::microseconds SimulatedServable::ComputeTime(int64_t rows, uint64_t work_us) const {
  const uint64_t fastest = rules_->least_run_times->Lower(work_key_, rows, work_us);
  return std::chrono::microseconds(static_cast<int64_t>(static_cast<double>(fastest) * rules_->compute_scale));
}

absl::StatusOr<std::vector<NamedTensor>> SimulatedServable::Run(const std::vector<at::Tensor>& inputs) const {
  return Watched(inputs, [&] { return inner_->Run(inputs); });
}

absl::StatusOr<std::vector<NamedTensor>> SimulatedServable::WarmUp(const std::vector<at::Tensor>& inputs) const {
  return Watched(inputs, [&] { return inner_->WarmUp(inputs); });
}

}  // namespace infergate
