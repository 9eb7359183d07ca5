#pragma once
// The request path inside the core: plans a decoded request's route, checks
// it against the model's declared inputs, queues it on its device's
// executor, and runs the batches the executors form; a batch that fails on
// its device goes through the failure policy (failure_policy.h: evict and
// retry, remember and fall back to the CPU, take the device out of service).
// Works on the core's parts (core_parts.h), which it does not own.
//
// Threading: Submit runs on the front end's thread; RunQueued on executor
// workers (the executors' batch runner), one batch per worker. Callbacks
// run on a worker, or on the submitting thread for an early error; never
// under a lock of this class (it has none).

#include <memory>

#include "scheduler/core/core_parts.h"
#include "scheduler/execution/device_executor.h"
#include "scheduler/model/inference_types.h"
#include "scheduler/model/request_handle.h"

namespace infergate {

struct BatchRun;  // batch_execution.h

class RequestDispatcher {
 public:
  explicit RequestDispatcher(CoreParts& core);

  // Plans, validates and queues; `done` runs exactly once. Refused at once
  // while the core drains.
  std::shared_ptr<RequestHandle> Submit(InferenceRequest request, InferCallback done);
  // The executors' batch runner: answers cancelled and expired jobs, runs the rest.
  void RunQueued(DeviceExecutor::Batch& batch);

 private:
  using Batch = DeviceExecutor::Batch;
  // Queues a routed job on `ex`, its device's executor; a refusal answers it.
  void Queue(const std::shared_ptr<Job>& job, DeviceExecutor& ex);
  void Execute(Batch& jobs, bool oom_retried);
  // `stage` ("loading", "running") is for the log.
  // --simulate-cpu-slowdown: the CPU run in `run` of `key`'s copy made as
  // long as a CPU `factor` times slower would take (its compute_us too, so
  // what is learned from it sees the slower CPU); the extra is
  // CoreParts::SimulatedCpuExtraUs; with `own_cpu` (one intra-op thread)
  // the run's CPU time is the slower CPU's whole time for it.
  void SlowDownAsSimulated(const ModelKey& key, BatchRun& run, bool own_cpu) const;
  void HandleFailure(Batch& jobs, const absl::Status& failure, bool oom_retried, const char* stage);
  void FallBack(Batch& jobs, const FallbackReason& reason, const absl::Status& failure);
  void ReportFallback(const std::string& from, const DeviceId& to, const FallbackReason& reason);
  // For traced requests (request_trace.h): a new attempt, queued on the
  // job's routed device now; and the batch `run` that ran on a model ready
  // at `model_ready`, in `dtype`.
  void NoteQueued(const Job& job);
  // The job's expected compute where it is routed (Job::expected_us): its
  // model's learned latency there; before one is learned, the figure its
  // route was planned on (Route::compute_expected_us), else the router's
  // figure for an unmeasured model. The executor counts it as work ahead,
  // and a request held for its load reserves a thread for it (auto_cost.h,
  // start_reservations.h).
  void ExpectCompute(Job& job) const;
  // The latest start that keeps the promise of the job's ready path
  // (Job::start_by; FairQueue's rule 3), from its route's estimate and its
  // expected compute; none without an estimate. After ExpectCompute.
  void PromiseStart(Job& job) const;
  void NoteRan(const BatchRun& run, Clock::time_point model_ready, DType dtype);

  CoreParts& core_;
};

}  // namespace infergate
