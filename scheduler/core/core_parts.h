#pragma once
// Everything the core owns, made and wired together once: the repository
// view, the devices, what is learned across restarts (device limits, model
// footprints, accuracy results), the model manager, the accuracy checks,
// the route planner, the lifecycle and its poller, the statistics and the
// device executors. InferenceCore (the facade, inference_core.h) and the
// RequestDispatcher (the request path, request_dispatcher.h) work on these
// parts directly; nothing here forwards.
//
// Threading: each part is thread-safe on its own (see its header). The
// fields are set in the constructor and not reassigned, except `observer`
// and `dispatcher`, set once before any work is queued, and `poller`, made
// by Start. The placement controller's hooks are the member functions
// below; they run on its thread. Destruction: the owner stops the poller, the checker and the
// executors first (InferenceCore::Shutdown); the executors are declared
// last so they are destroyed first.

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "devices/device_registry.h"
#include "devices/least_run_times.h"
#include "scheduler/cache/model_footprints.h"
#include "scheduler/cache/model_manager.h"
#include "scheduler/cache/state_file.h"
#include "scheduler/core/executor_set.h"
#include "scheduler/core/model_lifecycle.h"
#include "scheduler/core/repository_poller.h"
#include "scheduler/execution/arrival_loads.h"
#include "scheduler/model/load_source.h"
#include "scheduler/model/model_statistics.h"
#include "scheduler/model/scheduler_observer.h"
#include "scheduler/model/servable.h"
#include "scheduler/repository/model_repository.h"
#include "scheduler/routing/accuracy_ledger.h"
#include "scheduler/routing/auto_cost.h"
#include "scheduler/routing/demand_meter.h"
#include "scheduler/routing/placement_controller.h"
#include "scheduler/routing/precision_checker.h"
#include "scheduler/routing/route_planner.h"
#include "scheduler/routing/scheduler_options.h"
#include "scheduler/routing/unsupported_ops.h"

namespace infergate {

class RequestDispatcher;

struct CoreParts {
  // `options` must have its threads sized (thread_sizing.h).
  CoreParts(std::string repository_root, DeviceRegistry device_registry, SchedulerOptions sized_options,
            ServableLoader loader);
  CoreParts(const CoreParts&) = delete;
  CoreParts& operator=(const CoreParts&) = delete;

  // The placement controller's hooks (placement_controller.h), each for a
  // model's latest version:
  // the move policy's inputs for the accelerator `device`;
  MoveInputs PlacementInputs(const DeviceId& device);
  // a CPU copy of `model` unless it has one or the CPU's budget has no room;
  absl::Status KeepOnCpu(const std::string& model);
  // `model`'s idle copies on `device` evicted (demoted);
  absl::Status Demote(const std::string& model, const DeviceId& device);
  // `model` loaded and warmed up on `device` (planned there as a request
  // naming the device, without fallback), unless resident.
  absl::Status Promote(const std::string& model, const DeviceId& device);
  // What moving `bytes` of weights onto `device` is expected to cost before
  // a load there was measured: its simulated link (with the moves queued on
  // it now), or a PCIe 4 GPU's.
  double EstimatedTransferUs(const DeviceId& device, uint64_t bytes) const;
  // The same with nothing queued on the link.
  double TransferAloneUs(const DeviceId& device, uint64_t bytes) const;
  // A load of `there`'s copy (`bytes`) with nothing before it: its time
  // learned on that device from the source it would load from now, or from
  // a host copy never loaded there, its transfer; unset when never measured.
  std::optional<double> OwnLoadUs(const Route& there, uint64_t bytes) const;
  // The probe's load-and-run estimate for `there` (ready_path.h): the
  // model's load time learned on that device (OwnLoadUs) plus what it would
  // wait for: its link's queue and, with load on arrival, the loads on the
  // device's lane before it (or what is left of its model's load there,
  // which it would join); unset when no load there was measured or its
  // copy would not fit the device's budget without evicting another (with
  // load_and_run_displaces: without evicting more than DisplaceableBytes;
  // with a staging share, than the idle staged copies).
  std::optional<double> LoadAndRunEstimateUs(const Route& there) const;
  // Where a load of `there`'s copy would start now: its host copy when it
  // has one, else its file.
  LoadSource NextLoadSource(const Route& there) const;
  // Bytes of the copies on `device` a load may displace: idle, unpinned and
  // resident for at least the move policy's minimum residence.
  uint64_t DisplaceableBytes(const DeviceId& device) const;
  // The copies on `device` a load could evict now: idle and unpinned.
  std::vector<ResidentModel> IdleCopies(const DeviceId& device) const;
  // The accelerators available now (the placement controller's devices).
  std::vector<DeviceId> Accelerators() const;
  // A request for `model` counted at `now`: the move policy's demand, and
  // the staging demand when it is counted.
  void CountDemand(const std::string& model, std::chrono::steady_clock::time_point now);
  // Whether the staging share is in force: a share set, background moves
  // on (without them there is no policy to leave room from) and load and
  // run allowed (without it no request loads into the room left).
  bool StagingOn() const {
    return options.staging_share > 0 && options.background_moves && options.router.load_and_run;
  }
  // With a staging share: the idle, unpinned copies on `device` that
  // requests loaded (staged, not placed by the move policy).
  std::vector<ResidentModel> IdleStagedCopies(const DeviceId& device) const;
  // Before a request's load onto an accelerator (load and run), with a
  // staging share: evicts idle staged copies there, the least asked for
  // lately first (staging_eviction.h), until `there`'s copy fits the
  // budget; the move policy's copies stay (the cache's own eviction, least
  // recently used, would not tell them apart).
  void MakeStagingRoom(const Route& there);
  // With --simulate-cpu-slowdown: what a CPU run of `key`'s copy with
  // `rows` rows that took `wall_us`, its thread's CPU time `cpu_us`, is
  // held for beyond that (devices/simulation.h SimulatedCpuExtraUs, from
  // the least work such a run has taken, kept in simulated_cpu_work). Its
  // work is the thread's CPU time with one intra-op thread (the run was the
  // thread's alone), else the wall time. 0 without.
  double SimulatedCpuExtraUs(const ModelKey& key, int64_t rows, uint64_t wall_us, uint64_t cpu_us);
  // What a move onto `device` would wait for its link now: its simulated
  // link's queue; 0 on a real device (not measured there yet).
  double LinkQueueUs(const DeviceId& device) const;
  // Load on arrival: whether a request routed so (to load and run onto an
  // accelerator, ready_path.h) is held for its model's load before it is
  // queued; then HoldForLoad asks for the load on the device's lane of
  // `arrival_loads` (it makes staging room as a worker's would) and runs
  // `queue` once it has run, with a lease on the copy loaded (null if the
  // load failed) for the request to keep until it is answered. False, and
  // `queue` dropped: the copy is resident, or the lane is full or stopped;
  // the caller queues the request now.
  bool LoadsOnArrival(const Route& route) const;
  bool HoldForLoad(Route route, ArrivalLoads::ThenFn queue);
  // The copy that `hold` (made by HoldForLoad) keeps, when it is `key`'s
  // and the cache no longer has it: an explicit unload or a removal came
  // after the request was accepted and dropped it (ModelManager::
  // DropIfOutOfService). The request runs on that copy rather than loading
  // the model again, for nothing or from a file that may be gone. Null
  // otherwise (no hold, another key, or the copy still resident: then the
  // worker acquires it as any other).
  const ModelCache::Lease* DroppedHeldCopy(const ArrivalLoads::Hold& hold, const ModelKey& key) const;

  const SchedulerOptions options;
  SchedulerObserver ignore;
  SchedulerObserver* observer = &ignore;    // never null
  RequestDispatcher* dispatcher = nullptr;  // runs the executors' batches
  ModelRepository repository;
  DeviceRegistry devices;
  std::shared_ptr<StateFile> state_file;
  UnsupportedOpTable learned;  // what a device cannot run, per model file
  ModelFootprints footprints;
  LatencyStats latency;
  // The least work a CPU run of each copy (and rows) has taken: what a
  // simulated slower CPU charges from (SimulatedCpuExtraUs).
  LeastRunTimes simulated_cpu_work;
  ModelManager models;
  AccuracyLedger accuracy_ledger;
  PrecisionChecker checker;
  RoutePlanner planner;
  ModelLifecycle lifecycle;
  std::unique_ptr<RepositoryPoller> poller;  // made by Start when the options poll
  ModelStatistics statistics;
  std::atomic<bool> draining{false};  // new requests and loads are refused
  // Requests per second per model: the move policy's demand.
  DemandMeter demand;
  // The same over the staging demand window (scheduler_options.h): which
  // staged copies a load evicts first (staging_eviction.h). Counted only with
  // a staging share and the window on.
  DemandMeter staging_demand;
  // Moves models onto and off the accelerators, off the request path
  // (started by InferenceCore with --background-moves; stopped by its Drain
  // and Shutdown before the rest).
  PlacementController placement;
  // Loads asked for by requests as they arrive (HoldForLoad); stopped
  // with the placement controller.
  ArrivalLoads arrival_loads;
  ExecutorSet executors;
};

}  // namespace infergate
