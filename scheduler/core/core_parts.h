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
// by Start. Destruction: the owner stops the poller, the checker and the
// executors first (InferenceCore::Shutdown); the executors are declared
// last so they are destroyed first.

#include <atomic>
#include <memory>
#include <string>

#include "devices/device_registry.h"
#include "scheduler/routing/accuracy_ledger.h"
#include "scheduler/core/executor_set.h"
#include "scheduler/cache/model_footprints.h"
#include "scheduler/core/model_lifecycle.h"
#include "scheduler/cache/model_manager.h"
#include "scheduler/repository/model_repository.h"
#include "scheduler/model/model_statistics.h"
#include "scheduler/routing/precision_checker.h"
#include "scheduler/core/repository_poller.h"
#include "scheduler/routing/route_planner.h"
#include "scheduler/routing/auto_cost.h"
#include "scheduler/cache/background_mover.h"
#include "scheduler/model/scheduler_observer.h"
#include "scheduler/routing/scheduler_options.h"
#include "scheduler/model/servable.h"
#include "scheduler/cache/state_file.h"
#include "scheduler/routing/unsupported_ops.h"

namespace infergate {

class RequestDispatcher;

struct CoreParts {
  // `options` must have its threads sized (thread_sizing.h).
  CoreParts(std::string repository_root, DeviceRegistry device_registry, SchedulerOptions sized_options,
            ServableLoader loader);
  CoreParts(const CoreParts&) = delete;
  CoreParts& operator=(const CoreParts&) = delete;

  // The mover's work: `wanted`'s model loaded on its device (planned there
  // as a request naming the device, without fallback), unless resident.
  absl::Status MoveInBackground(const BackgroundMover::Wanted& wanted);

  const SchedulerOptions options;
  SchedulerObserver ignore;
  SchedulerObserver* observer = &ignore;  // never null
  RequestDispatcher* dispatcher = nullptr;  // runs the executors' batches
  ModelRepository repository;
  DeviceRegistry devices;
  std::shared_ptr<StateFile> state_file;
  UnsupportedOpTable learned;  // what a device cannot run, per model file
  ModelFootprints footprints;
  LatencyStats latency;
  ModelManager models;
  AccuracyLedger accuracy_ledger;
  PrecisionChecker checker;
  RoutePlanner planner;
  ModelLifecycle lifecycle;
  std::unique_ptr<RepositoryPoller> poller;  // made by Start when the options poll
  ModelStatistics statistics;
  std::atomic<bool> draining{false};  // new requests and loads are refused
  // Loads copies where `auto` wants them, off the request path; stopped by
  // InferenceCore::Shutdown before the rest.
  BackgroundMover mover;
  ExecutorSet executors;
};

}  // namespace infergate
