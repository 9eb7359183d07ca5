#pragma once
// The device executors: one per device available at start, made then and
// kept for the server's life. Knows the order devices stop in (the
// accelerators first, the CPU last: work failing on an accelerator may still
// move to the CPU) and nothing about requests.
//
// Threading: Find and the executors' own methods may be called from any
// thread once constructed; WaitIdle, RefuseQueued and Stop from the thread
// that stops the server. The executors are destroyed with the set, after
// Stop.

#include <functional>
#include <map>
#include <memory>

#include "absl/status/status.h"
#include "devices/device_info.h"
#include "scheduler/execution/device_executor.h"
#include "scheduler/routing/scheduler_options.h"

namespace infergate {

class ExecutorSet {
 public:
  // Makes an executor for every available device in `devices`, sized by
  // `options` (cpu_workers must be resolved: thread_sizing.h), each running
  // its batches with `run` and telling `rejected` of the jobs it answers
  // unrun, with the device.
  using RejectionListener = std::function<void(const DeviceId&, const Job&, RejectionReason)>;
  ExecutorSet(const std::vector<DeviceInfo>& devices, const SchedulerOptions& options, DeviceExecutor::BatchRunner run,
              RejectionListener rejected);
  ~ExecutorSet();
  ExecutorSet(const ExecutorSet&) = delete;
  ExecutorSet& operator=(const ExecutorSet&) = delete;

  // Null for a device that had no executor made (absent or unavailable at start).
  DeviceExecutor* Find(const DeviceId& device) const;

  // Waits until every executor is idle, or `deadline`: the accelerators
  // first, then the CPU. True if all are.
  bool WaitIdle(Clock::time_point deadline);
  // Answers every queued inference job with `status`, unrun; how many.
  size_t RefuseQueued(const absl::Status& status);
  // Runs what is queued and joins the workers: the accelerators first.
  void Stop();

 private:
  std::map<DeviceId, std::unique_ptr<DeviceExecutor>> executors_;
};

}  // namespace infergate
