#pragma once
// One unit of queued device work: an inference request with its route, or
// a plain task (an explicit model load). Internal to the scheduler; front
// ends see it only as a RequestHandle.
//
// Threading: created on the submitting thread; then owned by the queue it is
// in, or by the worker running it. `route` and the batch fields are written
// only before the job is (re)queued, so the worker that dequeues it reads
// them without a lock. `cancelled` and `executor` are atomics, read and
// written from any thread.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/execution/flow_key.h"
#include "scheduler/model/inference_types.h"
#include "scheduler/model/model_statistics.h"
#include "scheduler/model/request_handle.h"
#include "scheduler/model/route.h"
#include "scheduler/repository/scheduling_policy.h"

namespace infergate {

class DeviceExecutor;

struct Job final : RequestHandle {
  InferenceRequest request;
  Route route;
  bool routed = false;      // `route` is set
  std::string model_label;  // for a request never routed: the model if the repository knows it
  Clock::time_point enqueued;
  // Jobs with the same non-empty key may run as one batch: same model,
  // version, device, dtype, input names and non-batch dims. Empty: runs
  // alone (batching off, or inputs that cannot be stacked).
  std::string batch_key;
  int64_t rows = 1;
  // Queueing on the device (see FairQueue): the flow the job waits in (its
  // model version; empty for tasks), its priority level (1 is the highest),
  // and when its queue timeout passes (policy().delay_on_timeout says what
  // happens then).
  FlowKey flow;
  uint32_t priority_level = 1;
  Clock::time_point queue_deadline = Clock::time_point::max();
  // The latest start that keeps the promise of the ready path `auto` chose
  // for it (to finish within kRegretMargin of the estimate it was routed
  // on, scheduler/routing/ready_path.h); max for none (no estimate, an
  // explicit device, a fallback). FairQueue lets no other flow's job go
  // ahead of it where that would start it later (its rule 3).
  Clock::time_point start_by = Clock::time_point::max();
  // Set for non-inference work; runs alone.
  std::function<void()> task;
  // The router's estimate of the job's compute where it is sent (its
  // model's learned latency there), in microseconds; 0 for none (a task).
  // The executor counts it as work ahead from Submit until the job ran or
  // was answered without running (DeviceExecutor::expected_work_us).
  int64_t expected_us = 0;
  int64_t counted_us = 0;  // what the executor that holds it added (its to take back)
  std::atomic<bool> cancelled{false};
  // The executor whose queue holds the job, or last held it. A fallback
  // moves the job to another executor while a client may be cancelling it,
  // so both sides go through this atomic (see DeviceExecutor::Submit).
  std::atomic<DeviceExecutor*> executor{nullptr};
  // Where the answer is counted once routed; not owned, may be null.
  ModelStatistics* statistics = nullptr;
  // Load on arrival (arrival_loads.h): a lease on the copy loaded for this
  // request before it was queued, so the copy is not evicted before the
  // request runs; set before Submit, dropped by Finish.
  std::shared_ptr<void> model_hold;
  uint64_t held_us = 0;  // how long it was held for that load
  // The reservation it left on its executor while held (DeviceExecutor::
  // Reserve); Submit drops it. 0: none.
  uint64_t reservation = 0;

  // What the routed model's config says about batching and queueing; the
  // default for a job never routed (a task). Read from the route's model
  // entry, which the job holds: no copy, no reference count per request.
  const SchedulingPolicy& policy() const;

  void Cancel() override;

  // Delivers the answer; only the first call counts. Runs the callback on
  // the calling thread.
  void Finish(absl::StatusOr<InferenceResult> result);
  bool finished() const { return finished_.load(); }
  void set_done(InferCallback done) { done_ = std::move(done); }

 private:
  InferCallback done_;
  std::atomic<bool> finished_{false};
};

}  // namespace infergate
