#include "scheduler/core/executor_set.h"

#include "common/cpu_policy.h"
#include "common/logging.h"
#include "devices/worker_stream.h"

namespace infergate {

ExecutorSet::ExecutorSet(const std::vector<DeviceInfo>& devices, const SchedulerOptions& options,
                         DeviceExecutor::BatchRunner run, RejectionListener rejected) {
  for (const DeviceInfo& d : devices) {
    if (!d.available) continue;
    DeviceExecutor::Options executor_options;
    executor_options.workers = d.id.kind == DeviceKind::kCpu ? options.cpu_workers : options.accelerator_workers;
    executor_options.capacity = options.queue_capacity;
    executor_options.fair = options.fair_queueing;
    executor_options.priority_aging = options.priority_aging;
    // Each accelerator worker queues its batches on a stream of its own, so
    // --accelerator-workers can overlap them on the device (on the CPU and
    // simulated devices UseOwnStream does nothing).
    // Workers run under the normal CPU policy, whatever the thread that
    // started them runs under (main.cc: cpu_policy.h), so a worker woken for
    // a batch may take a core at once.
    executor_options.on_worker_start = [d] {
      static LogRateLimiter stream_limiter(1);
      if (absl::Status s = UseOwnStream(d); !s.ok()) {
        if (uint64_t held = 0; stream_limiter.Allow(&held)) LOG_WARNING << s.message() << SuppressedNote(held);
      }
      UseNormalCpuPolicyForDeviceWork("device worker");
    };
    auto executor = std::make_unique<DeviceExecutor>(d.id, executor_options, run);
    executor->set_spin_us(options.worker_spin_us);
    executor->set_rejection_listener(
        [rejected, id = d.id](const Job& job, RejectionReason reason) { rejected(id, job, reason); });
    executors_[d.id] = std::move(executor);
  }
}

ExecutorSet::~ExecutorSet() { Stop(); }

DeviceExecutor* ExecutorSet::Find(const DeviceId& device) const {
  auto it = executors_.find(device);
  return it == executors_.end() ? nullptr : it->second.get();
}

bool ExecutorSet::WaitIdle(Clock::time_point deadline) {
  bool idle = true;
  for (auto& [id, executor] : executors_) {
    if (id.kind != DeviceKind::kCpu) idle = executor->WaitIdle(deadline) && idle;
  }
  for (auto& [id, executor] : executors_) {
    if (id.kind == DeviceKind::kCpu) idle = executor->WaitIdle(deadline) && idle;
  }
  return idle;
}

size_t ExecutorSet::RefuseQueued(const absl::Status& status) {
  size_t refused = 0;
  for (auto& [id, executor] : executors_) refused += executor->RefuseQueued(status);
  return refused;
}

void ExecutorSet::Stop() {
  for (auto& [id, executor] : executors_) {
    if (id.kind != DeviceKind::kCpu) executor->Stop();
  }
  for (auto& [id, executor] : executors_) executor->Stop();
}

}  // namespace infergate
