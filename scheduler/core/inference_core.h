#pragma once
// The core facade: the one interface every front end (infergate.v1 over
// gRPC, the Open Inference Protocol, metrics) uses. Front ends stay
// stateless: they decode a wire request into an InferenceRequest, submit it
// here, and encode what comes back. Routing, queues, batching, the model
// cache and the failure policy stay behind this header.
//
// Ownership: the core owns every part (core_parts.h: the repository view,
// the devices, the model manager, the planner, the lifecycle, the
// executors) and the request path over them (request_dispatcher.h). It
// must outlive every front end that holds a reference.
//
// Threading: every method is thread-safe except Start, Drain and Shutdown,
// which the process calls once, in that order, from the thread that starts
// and stops the server. Infer callbacks run exactly once, on a device worker
// thread (or, for an error found before queueing, on the submitting thread);
// they may finish an RPC but must not block or call back into Drain or
// Shutdown.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "devices/device_info.h"
#include "devices/device_registry.h"
#include "infergate/v1/model_config.pb.h"
#include "scheduler/model/inference_types.h"
#include "scheduler/model/model_key.h"
#include "scheduler/model/model_statistics.h"
#include "scheduler/model/request_handle.h"
#include "scheduler/model/scheduler_observer.h"
#include "scheduler/model/servable.h"
#include "scheduler/repository/version_status.h"
#include "scheduler/routing/scheduler_options.h"

namespace infergate {

struct CoreParts;
class RequestDispatcher;

// Requests of one model version waiting on a device.
struct ModelQueueDepth {
  std::string model;
  int64_t version = 0;
  size_t depth = 0;
};

// One device as front ends and metrics see it, read in one go.
struct DeviceStatus {
  DeviceInfo info;  // identity, capabilities, memory; `available` is false while out of service
  size_t queue_depth = 0;
  size_t held_for_load = 0;      // held while their model loads on arrival, not yet queued (arrival_loads.h)
  size_t reserved_for_load = 0;  // of those, the ones reserving a thread (DeviceExecutor::Reserve)
  std::vector<ModelQueueDepth> model_queues;  // versions with requests waiting
  Clock::duration oldest_running{0};          // age of the oldest batch running; zero when idle
  size_t in_flight = 0;
  int workers = 0;
  size_t queue_capacity = 0;
  uint64_t busy_us = 0;  // cumulative worker time spent running
  uint64_t cache_budget_bytes = 0;
  std::vector<ResidentModel> resident;
  // The CPU only: host copies of loaded weights (host_copy_store.h), the
  // bytes they hold in its budget, and the loads that started from one.
  size_t host_copies = 0;
  uint64_t host_copy_bytes = 0;
  uint64_t loads_from_host_copy = 0;
  std::vector<std::string> unsupported_ops;  // learned: "model:aten::op" (MPS)
};

// One model of the repository.
struct ModelStatus {
  std::string name;
  v1::ModelConfig config;
  std::vector<int64_t> versions;           // served (READY), ascending
  std::vector<VersionStatus> states;       // every version on disk or unloading, ascending
  absl::Status problem;                    // why the model cannot be served at all, if so
  std::string config_problem;              // a refused config.pbtxt update (the previous config applies)
  std::vector<ModelKey> loaded;            // resident copies
  std::vector<DeviceId> moving;            // accelerators it is moving to in the background now
  std::vector<DeviceId> demoted;           // accelerators it was demoted from, until it is back
  std::vector<PrecisionReport> precision;  // accuracy checks of served versions

  // Whether the config lets the model run on `device` (kind and id).
  bool AllowsDevice(const DeviceId& device) const;
};

class InferenceCore {
 public:
  // How the none and poll model-control modes refuse a load or unload
  // (UNAVAILABLE): Triton's words, which its clients match at the start of
  // the message.
  static constexpr char kModelControlRefusal[] = "explicit model load / unload is not allowed if polling is enabled";

  // `loader` empty means TorchScript models; tests pass fakes.
  InferenceCore(std::string repository_root, DeviceRegistry devices, SchedulerOptions options,
                ServableLoader loader = {});
  ~InferenceCore();
  InferenceCore(const InferenceCore&) = delete;
  InferenceCore& operator=(const InferenceCore&) = delete;

  // Scans the repository, warms up the models that ask for it and starts
  // following the repository on disk (SchedulerOptions::
  // repository_poll_interval); ready() from then on. Fails only when the
  // repository cannot be read.
  absl::Status Start();
  bool ready() const;

  // Routes, validates and queues one request; `done` receives the answer.
  // The handle cancels it.
  std::shared_ptr<RequestHandle> Infer(InferenceRequest request, InferCallback done);

  // Loads a model ahead of traffic; `done` runs once, on a device worker.
  // Both refuse in the none and poll model control modes (UNAVAILABLE).
  void LoadModel(const LoadRequest& request, std::function<void(absl::StatusOr<LoadResult>)> done);
  // Drops matching resident copies; returns how many.
  absl::StatusOr<size_t> UnloadModel(const LoadRequest& request);
  // Takes a model out of the repository altogether: its resident copies go
  // and later requests get NOT_FOUND (for models placed by ModelMesh).
  void ForgetModel(const std::string& name);
  // The cache bytes serving model folder `folder` as `name` is expected to
  // take, from learned footprints or file sizes; no model is loaded.
  absl::StatusOr<uint64_t> PredictFootprint(const std::string& name, const std::string& folder) const;

  // The repository as served (an in-memory view, no disk I/O), with what is
  // resident.
  absl::StatusOr<std::vector<ModelStatus>> Models() const;
  // Whether `name` is a repository model (for bounded metric labels).
  bool KnownModel(absl::string_view name) const;
  // One model of the view. `version` empty: any; else it must be served
  // (the error says why not). INVALID_ARGUMENT, NOT_FOUND, UNAVAILABLE
  // (loading), or FAILED_PRECONDITION for a model whose config is broken.
  absl::StatusOr<ModelStatus> Model(absl::string_view name, absl::string_view version = "");

  // What ran, per model version: every version in the repository, zeros
  // where nothing ran. `model` empty: all models; `version` empty: all
  // versions. NOT_FOUND for an unknown model or version.
  absl::StatusOr<std::vector<ModelStats>> Statistics(absl::string_view model, absl::string_view version);

  // Every device with live figures, in cold-start preference order.
  std::vector<DeviceStatus> Devices() const;

  // Refuses new requests and waits for accepted ones up to `deadline`; true
  // if all finished, else what is still queued is answered UNAVAILABLE,
  // unrun. Then Shutdown stops the workers.
  bool Drain(std::chrono::steady_clock::time_point deadline);
  void Shutdown();

  // Events for metrics and logs. Not owned; null ignores them. Set before
  // Start; calls come from worker and front-end threads and must not block.
  void SetObserver(SchedulerObserver* observer);

 private:
  // Runs the accuracy checks `model` needs on `device` before it serves
  // (warm-up, explicit loads): the dtype AUTO or `precision` picks, then
  // the next one if that failed.
  void CheckPrecisionNow(const std::string& model, const std::string& version, const std::string& device,
                         Precision precision, const char* occasion);
  // Loads (and runs once on zeros) every model whose config asks for warm-up.
  // Explicit model control (SchedulerOptions::model_control): at start,
  // every model but the initial ones is left unloaded (INVALID_ARGUMENT
  // for an initial one the repository lacks); loads and unloads are
  // refused in the none and poll modes.
  absl::Status ServeInitialModelsOnly();
  absl::Status CheckExplicitControl() const;
  void Warmup();

  std::unique_ptr<CoreParts> parts_;
  std::unique_ptr<RequestDispatcher> dispatcher_;
  std::atomic<bool> ready_{false};
};

}  // namespace infergate
