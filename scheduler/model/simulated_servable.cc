#include "scheduler/model/simulated_servable.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/thread_cpu_time.h"
#include "devices/device_failure.h"
#include "devices/simulated_run.h"

namespace infergate {

absl::StatusOr<std::shared_ptr<Servable>> SimulatedServable::Wrap(std::shared_ptr<Servable> inner,
                                                                  const DeviceInfo& device, const std::string& model) {
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
  return std::shared_ptr<Servable>(new SimulatedServable(std::move(inner), device.simulation, reserved, transfer_time));
}

SimulatedServable::SimulatedServable(std::shared_ptr<Servable> inner, std::shared_ptr<const SimulationRules> rules,
                                     uint64_t reserved_bytes, std::chrono::microseconds transfer_time)
    : inner_(std::move(inner)),
      rules_(std::move(rules)),
      reserved_bytes_(reserved_bytes),
      transfer_time_(transfer_time) {}

SimulatedServable::~SimulatedServable() {
  if (rules_->memory) rules_->memory->Release(reserved_bytes_);
}

template <typename RunInner>
absl::StatusOr<std::vector<NamedTensor>> SimulatedServable::Watched(RunInner run) const {
  // The loader's DeviceComputeScope around its forward pass applies the
  // rules and fails the run as the backend would.
  SimulationRulesForThisThread rules(rules_.get());
  const auto started = std::chrono::steady_clock::now();
  const uint64_t cpu_started = ThreadCpuMicros();
  absl::StatusOr<std::vector<NamedTensor>> outputs = run();
  if (rules_->compute_scale > 0 && outputs.ok()) {
    const auto took = std::chrono::steady_clock::now() - started;
    const double work_us =
        at::get_num_threads() == 1
            ? static_cast<double>(ThreadCpuMicros() - cpu_started)
            : static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(took).count());
    std::this_thread::sleep_until(started +
                                  std::chrono::microseconds(static_cast<int64_t>(work_us * rules_->compute_scale)));
  }
  return outputs;
}

absl::StatusOr<std::vector<NamedTensor>> SimulatedServable::Run(const std::vector<at::Tensor>& inputs) const {
  return Watched([&] { return inner_->Run(inputs); });
}

absl::StatusOr<std::vector<NamedTensor>> SimulatedServable::WarmUp(const std::vector<at::Tensor>& inputs) const {
  return Watched([&] { return inner_->WarmUp(inputs); });
}

}  // namespace infergate
