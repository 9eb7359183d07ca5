#pragma once
// Routes requests to devices, queues them on each device's executor, loads
// models through the per-device cache and runs them off the gRPC threads.

#include "absl/strings/string_view.h"
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devices/device_registry.h"
#include "scheduler/device_executor.h"
#include "scheduler/inference_types.h"
#include "scheduler/model_cache.h"
#include "scheduler/model_repository.h"

namespace infergate {

struct SchedulerOptions {
  int cpu_workers = 0;       // 0: picked from the core count
  int intra_op_threads = 0;  // 0: cores / cpu_workers
  size_t queue_capacity = 1024;
};

struct DeviceLoad {
  size_t queue_depth = 0;
  size_t in_flight = 0;
};

class Scheduler {
 public:
  Scheduler(ModelRepository& repository, DeviceRegistry& devices, SchedulerOptions options);
  ~Scheduler();

  // Resolves model, version, device and precision, validates the inputs and
  // queues the work; `done` runs exactly once, on a worker thread or, for an
  // early error, on the caller's.
  void Infer(InferenceRequest request, InferCallback done);

  // Loads a model on a device ahead of traffic; `done` runs once.
  void LoadModel(const LoadRequest& request, std::function<void(absl::StatusOr<LoadResult>)> done);
  // Drops matching cache entries; empty version/device mean all.
  absl::StatusOr<size_t> UnloadModel(const LoadRequest& request);

  // Loads (and runs once on zeros) every model whose config asks for warm-up.
  void Warmup();
  // Refuses new work and finishes what is queued.
  void Shutdown();

  std::vector<ResidentModel> Resident() const { return cache_.Resident(); }
  DeviceLoad Load(const DeviceId& device) const;
  const SchedulerOptions& options() const { return options_; }

 private:
  struct Route {
    std::shared_ptr<const ModelEntry> model;
    int64_t version = 0;
    DeviceResolution resolution;
    DeviceInfo device;
    DType dtype = DType::kFloat32;
  };
  absl::StatusOr<Route> Plan(absl::string_view model, absl::string_view version, absl::string_view device,
                             Precision precision, bool allow_fallback);
  absl::StatusOr<std::shared_ptr<LoadedModel>> GetModel(const Route& route, bool* loaded);
  void RunInference(const Route& route, InferenceRequest& request, Clock::time_point enqueued,
                    const InferCallback& done);

  ModelRepository& repository_;
  DeviceRegistry& devices_;
  SchedulerOptions options_;
  ModelCache cache_;
  std::map<DeviceId, std::unique_ptr<DeviceExecutor>> executors_;
};

}  // namespace infergate
