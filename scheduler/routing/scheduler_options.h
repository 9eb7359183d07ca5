#pragma once
// How the core is sized and tuned: workers, queues, batching, cache budgets,
// the failure cooldown and routing weights. Plain data, free of LibTorch, so
// option parsing builds without it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "devices/device_id.h"
#include "scheduler/routing/demand_meter.h"
#include "scheduler/routing/placement_controller.h"
#include "scheduler/routing/router_options.h"

namespace infergate {

struct SchedulerOptions {
  int cpu_workers = 0;       // 0: picked from the core count
  int intra_op_threads = 0;  // 0: cores / cpu_workers
  int accelerator_workers = 1;
  size_t queue_capacity = 1024;
  // Models share a device fairly by device time (see FairQueue); false
  // serves them in arrival order (FIFO), kept for comparison.
  bool fair_queueing = true;
  // A waiting request's priority improves by one level per this much waiting.
  std::chrono::milliseconds priority_aging{100};
  bool batching = true;  // false: every request runs alone
  // A tensor's elements at most (the requests' limit): a warm-up sample's
  // too (warmup_samples.h).
  int64_t max_tensor_elements = int64_t{1} << 28;
  int worker_spin_us = 0;  // idle workers poll this long before sleeping
  // Cache budget per device; devices not listed get this fraction of their memory.
  std::map<DeviceId, uint64_t> cache_budgets;
  double cache_budget_fraction = 0.8;
  std::string state_file;  // learned device limits; empty = not persisted
  // How long a device that failed stays out of service.
  std::chrono::milliseconds device_failure_cooldown{30000};
  // How often the repository on disk is polled for changes; 0: never (the
  // view changes only on LoadModel).
  std::chrono::milliseconds repository_poll_interval{0};
  // Triton's model control modes (--model-control-mode). kNone and kPoll
  // refuse explicit loads and unloads (UNAVAILABLE, in Triton's words);
  // kExplicit serves only `initial_models` from the start (every other
  // repository model starts unloaded, as after an explicit unload) and
  // takes loads and unloads; kFollow, infergate's own, follows the
  // repository (when polled) and takes loads and unloads too.
  enum class ModelControl { kFollow, kNone, kPoll, kExplicit };
  ModelControl model_control = ModelControl::kFollow;
  // kExplicit: the models served from the start ("*": every one).
  std::vector<std::string> initial_models;
  RouterOptions router;
  // The accuracy contract: FP16/BF16 serve a model on a device only once a
  // check against FP32 on the CPU passed (precision_checker.h). false
  // takes every dtype as the precision policy picks it, unchecked.
  bool precision_checks = true;
  // No cold start: `auto` runs a request where its model is ready while the
  // placement controller (placement_controller.h) moves models onto the
  // accelerators by the move policy, and a model that gives up its room
  // keeps a CPU copy that answers meanwhile. false: today's evict-and-reload
  // (`auto` weighs a load as a fixed penalty, and a request may wait for it).
  bool background_moves = true;
  // Host copies of loaded weights (host_copy_store.h): a TorchScript model
  // loaded onto an accelerator keeps its weights as read in host memory,
  // up to this share of the CPU's cache budget (counted in it), and a later
  // load of the same file (back onto the accelerator, or the CPU copy of a
  // demoted model) starts from there, without reading or deserialising the
  // file. 0: off (every load reads the file).
  double host_copy_share = 0.5;
  // Load and run may displace (ready_path.h): a request whose model would
  // finish sooner loaded onto its best device than on a ready copy elsewhere
  // takes that path also when the device has no free room, if idle,
  // unpinned copies resident there for at least the move policy's minimum
  // residence can make it (they are evicted by the load, least recently used
  // first, and keep answering from CPU copies). false: load and run only
  // into free room; displacing is the move policy's alone.
  bool load_and_run_displaces = false;
  // The staging share (move_policy.h): this share of each accelerator's
  // budget is left out of the move policy's, so a request whose model
  // would finish sooner loaded there than on a ready copy elsewhere finds
  // room to load and run. The copies it loads (staged) stay in that room
  // until a later load needs it (staging_eviction.h: the least asked for
  // over `staging_demand_window` going first) or a promotion needs the
  // device's room. 0: the policy's budget is the device's, and load and run
  // has room only where the policy left some. Only with background moves
  // (evict-and-reload has no policy to leave room from). Half by default:
  // in the churn benchmark's two device profiles it cut the p99 to 0.34-0.41x
  // (PCIe 4, three seeds) and 0.02x (H200, a CPU 24x slower) of the policy's
  // without one, at about evict-and-reload's bytes (docs/benchmarks.md).
  double staging_share = 0.5;
  // The window of the recent demand that orders the staged copies'
  // eviction (staging_eviction.h; the move policy's change detection). 0:
  // the least recently used first.
  std::chrono::milliseconds staging_demand_window{2000};
  // The move policy's window, hysteresis and minimum residence, and how
  // often it decides (placement_controller.h).
  PlacementController::Options placement;
  // How each model's demand is measured for the move policy: its window
  // and the change detection that follows a step in it (demand_meter.h).
  DemandMeter::Options demand;
  // Simulation only: a CPU run takes this many times its compute time (the
  // worker waits out the rest), so simulated accelerators, which compute on
  // the same CPU, are that much faster than the CPU as a real one would be.
  // 1: off.
  double simulated_cpu_slowdown = 1;
};

}  // namespace infergate
