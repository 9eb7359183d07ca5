#pragma once
// The core's engine: takes a decoded request, plans its route, queues it on
// the device's executor, runs batches there, and applies the failure policy
// (evict and retry, CPU fallback, device out of service). It composes the
// parts that each own one concern:
//   RoutePlanner   where a request runs (route_planner.h)
//   PrecisionChecker which reduced dtypes keep a model accurate (precision_checker.h)
//   DecideOnFailure what a device failure leads to (failure_policy.h)
//   ModelManager   resident models, loads, unloads, warm-up (model_manager.h)
//   ModelLifecycle what the repository on disk serves (model_lifecycle.h),
//                  followed by a RepositoryPoller
//   DeviceExecutor queues, workers, batch forming (device_executor.h)
//   RunBatch       one batch on one servable (batch_execution.h)
// Front ends do not use this class; they use InferenceCore.
//
// Threading: Submit, Load, Unload and the figures are called from front-end
// threads; batches run on executor workers. Callbacks run on a worker, or
// on the submitting thread for an early error. Drain and Shutdown are called
// once, from the thread that stops the server.

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devices/device_registry.h"
#include "scheduler/device_executor.h"
#include "scheduler/inference_types.h"
#include "scheduler/model_lifecycle.h"
#include "scheduler/model_manager.h"
#include "scheduler/model_repository.h"
#include "scheduler/model_statistics.h"
#include "scheduler/accuracy_ledger.h"
#include "scheduler/precision_checker.h"
#include "scheduler/repository_poller.h"
#include "scheduler/request_handle.h"
#include "scheduler/route_planner.h"
#include "scheduler/router.h"
#include "scheduler/scheduler_observer.h"
#include "scheduler/scheduler_options.h"
#include "scheduler/unsupported_ops.h"

namespace infergate {

struct DeviceLoad {
  size_t queue_depth = 0;
  std::map<FlowKey, size_t> queue_depth_by_model;  // model version -> waiting
  Clock::duration oldest_running{0};                   // age of the oldest running batch
  size_t in_flight = 0;
  uint64_t busy_us = 0;
  int workers = 0;
  size_t capacity = 0;
};

struct BatchRun;  // batch_execution.h

class Scheduler {
 public:
  // `repository` and `devices` are not owned and must outlive the scheduler.
  Scheduler(ModelRepository& repository, DeviceRegistry& devices, SchedulerOptions options,
            ServableLoader loader = {});
  ~Scheduler();

  // Plans, validates and queues; `done` runs exactly once.
  std::shared_ptr<RequestHandle> Submit(InferenceRequest request, InferCallback done);
  // Loads a model on a device ahead of traffic; `done` runs once, on a worker.
  void LoadModel(const LoadRequest& request, std::function<void(absl::StatusOr<LoadResult>)> done);
  absl::StatusOr<size_t> UnloadModel(const LoadRequest& request);
  // Takes a model out of the repository altogether (ModelLifecycle::Forget).
  void ForgetModel(const std::string& name);
  // The bytes serving model folder `folder` as `name` is expected to take
  // in the cache (every version its policy serves, on the device a cold
  // start picks): learned footprints, else estimates from the file sizes.
  // Reads the folder's listing and config only.
  absl::StatusOr<uint64_t> PredictFootprint(const std::string& name, const std::string& folder) const;
  // Loads (and runs once on zeros) every model whose config asks for warm-up.
  void Warmup();
  // Follows the repository on disk from `initial` (the scan the view was
  // built from), when the options set a poll interval.
  void StartPolling(DiskRepository initial);

  // Refuses new requests, then waits up to `deadline` for accepted ones:
  // accelerators first, the CPU last, since work failing on an accelerator
  // may still move to the CPU. True if everything finished; else the
  // requests still queued have been answered UNAVAILABLE without running
  // (batches running go on).
  bool Drain(Clock::time_point deadline);
  // Runs whatever is still queued and joins the workers.
  void Shutdown();

  DeviceLoad Load(const DeviceId& device) const;
  std::vector<ResidentModel> Resident() const { return models_.Resident(); }
  uint64_t CacheBudget(const DeviceId& device) const { return models_.Budget(device); }
  std::vector<std::string> UnsupportedOps(DeviceKind kind) const { return learned_.ForKind(kind); }
  std::vector<ModelStats> Statistics(const std::string& model) const { return statistics_.Snapshot(model); }
  std::vector<PrecisionReport> PrecisionReports(const std::string& model) const { return checker_.Reports(model); }
  // Where events go; set before serving. Not owned; null ignores them.
  void SetObserver(SchedulerObserver* observer);

 private:
  using Batch = DeviceExecutor::Batch;
  // The executors' batch runner: answers cancelled and expired jobs, runs the rest.
  void RunQueued(Batch& batch);
  void Execute(Batch& jobs, bool oom_retried);
  // `stage` ("loading", "running") is for the log.
  void HandleFailure(Batch& jobs, const absl::Status& failure, bool oom_retried, const char* stage);
  void FallBack(Batch& jobs, const FallbackReason& reason, const absl::Status& failure);
  void ReportFallback(const std::string& from, const DeviceId& to, const FallbackReason& reason);
  // For traced requests (request_trace.h): a new attempt, queued on the
  // job's routed device now; and the batch `run` that ran on a model ready
  // at `model_ready`, in `dtype`.
  void NoteQueued(const Job& job);
  void NoteRan(const BatchRun& run, Clock::time_point model_ready, DType dtype);
  // Runs the accuracy checks `model` needs on `device` before it serves
  // (warm-up, explicit loads): the dtype AUTO or `precision` picks, then
  // the next one if that failed.
  void CheckPrecisionNow(const std::string& model, const std::string& version, const std::string& device,
                         Precision precision, const char* occasion);
  DeviceExecutor* Executor(const DeviceId& device) const;

  SchedulerObserver ignore_;
  SchedulerObserver* observer_ = &ignore_;
  ModelRepository& repository_;
  DeviceRegistry& devices_;
  SchedulerOptions options_;
  std::shared_ptr<StateFile> state_file_;  // what the two tables below learn, across restarts
  UnsupportedOpTable learned_;
  ModelFootprints footprints_;
  LatencyStats latency_;
  ModelManager models_;
  AccuracyLedger accuracy_ledger_;
  PrecisionChecker checker_;
  RoutePlanner planner_;
  ModelLifecycle lifecycle_;
  std::unique_ptr<RepositoryPoller> poller_;
  ModelStatistics statistics_;
  std::atomic<bool> draining_{false};
  std::map<DeviceId, std::unique_ptr<DeviceExecutor>> executors_;
};

}  // namespace infergate
