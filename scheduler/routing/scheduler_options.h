#pragma once
// How the core is sized and tuned: workers, queues, batching, cache budgets,
// the failure cooldown and routing weights. Plain data, free of LibTorch, so
// option parsing builds without it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "devices/device_id.h"
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
  bool batching = true;    // false: every request runs alone
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
  RouterOptions router;
  // The accuracy contract: FP16/BF16 serve a model on a device only once a
  // check against FP32 on the CPU passed (precision_checker.h). false
  // takes every dtype as the precision policy picks it, unchecked.
  bool precision_checks = true;
  // `auto` moves a model in the background to the device that would serve
  // it sooner, while its requests run where it is resident
  // (background_mover.h); false leaves it where it is.
  bool background_moves = true;
};

}  // namespace infergate
