#pragma once
// Routes requests to devices, queues them on each device's executor, batches
// them, loads models through the per-device cache, retries on the CPU what a
// device cannot run, and runs everything off the gRPC threads.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devices/device_registry.h"
#include "scheduler/device_executor.h"
#include "scheduler/inference_types.h"
#include "scheduler/job.h"
#include "scheduler/model_cache.h"
#include "scheduler/model_repository.h"
#include "scheduler/router.h"
#include "scheduler/scheduler_observer.h"
#include "scheduler/unsupported_ops.h"

namespace infergate {

struct SchedulerOptions {
  int cpu_workers = 0;       // 0: picked from the core count
  int intra_op_threads = 0;  // 0: cores / cpu_workers
  int accelerator_workers = 1;
  size_t queue_capacity = 1024;
  bool batching = true;  // false: every request runs alone
  int worker_spin_us = 0;  // idle workers poll this long before sleeping
  // Cache budget per device; devices not listed get this fraction of their memory.
  std::map<DeviceId, uint64_t> cache_budgets;
  double cache_budget_fraction = 0.8;
  std::string state_file;  // learned device limits; empty = not persisted
  // How long a device that failed stays out of service.
  std::chrono::milliseconds device_failure_cooldown{30000};
  RouterOptions router;
};

struct DeviceLoad {
  size_t queue_depth = 0;
  size_t in_flight = 0;
  uint64_t busy_us = 0;
  int workers = 0;
  size_t capacity = 0;
};

// Counts the scheduler keeps for tests, logs and metrics.
struct SchedulerCounters {
  std::atomic<uint64_t> device_retries{0};   // runs retried on the CPU after a device failure
  std::atomic<uint64_t> learned_redirects{0};  // requests sent to the CPU by the learned table
  std::atomic<uint64_t> oom_retries{0};
};

class Scheduler {
 public:
  Scheduler(ModelRepository& repository, DeviceRegistry& devices, SchedulerOptions options);
  ~Scheduler();

  // Resolves model, version, device and precision, validates the inputs and
  // queues the work. `done` runs exactly once: on a worker thread, or for an
  // early error on the caller's. The returned job can be cancelled.
  std::shared_ptr<Job> Infer(InferenceRequest request, InferCallback done);
  // The client went away: a queued job leaves the queue (answered CANCELLED).
  void Cancel(const std::shared_ptr<Job>& job);

  // Loads a model on a device ahead of traffic; `done` runs once.
  void LoadModel(const LoadRequest& request, std::function<void(absl::StatusOr<LoadResult>)> done);
  // Drops matching cache entries; empty version/device mean all.
  absl::StatusOr<size_t> UnloadModel(const LoadRequest& request);

  // Loads (and runs once on zeros) every model whose config asks for warm-up.
  void Warmup();
  // Refuses new work, then waits up to `deadline` for queued and running
  // work to finish; true if everything finished.
  bool Drain(Clock::time_point deadline);
  // Stops the workers (after finishing whatever is still queued).
  void Shutdown();

  std::vector<ResidentModel> Resident() const { return cache_.Resident(); }
  DeviceLoad Load(const DeviceId& device) const;
  std::vector<std::string> UnsupportedOps(DeviceKind kind) const { return unsupported_.ForKind(kind); }
  const SchedulerOptions& options() const { return options_; }
  const SchedulerCounters& counters() const { return counters_; }
  ModelCache& cache() { return cache_; }
  // Where events go; set before serving. Not owned.
  void SetObserver(SchedulerObserver* observer) { observer_ = observer ? observer : &ignore_; }

 private:
  absl::StatusOr<Route> Plan(absl::string_view model, absl::string_view version, absl::string_view device,
                             Precision precision, bool allow_fallback);
  absl::Status PlaceOn(Route& route, const DeviceId& device, Precision precision);
  DeviceId ChooseAuto(const ModelEntry& model, int64_t version, Precision precision,
                      const std::vector<DeviceId>& allowed);
  absl::StatusOr<ModelCache::Lease> GetModel(const Route& route);
  void RunBatch(DeviceExecutor::Batch& batch);
  void RunOnDevice(DeviceExecutor::Batch& jobs, bool oom_retried);
  // Sends `jobs` to the CPU after a device failure, or fails them.
  void FallBack(DeviceExecutor::Batch& jobs, const absl::Status& failure, const std::string& reason);
  DeviceExecutor* Executor(const DeviceId& device) const;

  SchedulerObserver ignore_;
  SchedulerObserver* observer_ = &ignore_;
  ModelRepository& repository_;
  DeviceRegistry& devices_;
  SchedulerOptions options_;
  ModelCache cache_;
  LatencyStats latency_;
  UnsupportedOpTable unsupported_;
  SchedulerCounters counters_;
  std::map<DeviceId, std::unique_ptr<DeviceExecutor>> executors_;
};

}  // namespace infergate
