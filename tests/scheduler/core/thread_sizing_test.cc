// How the core's threads are sized, and how many runs of one model a device
// takes at once, as tables.

#include "scheduler/core/thread_sizing.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

TEST(ThreadSizing, WorkersAndIntraOpThreadsFromTheCores) {
  struct Case {
    int cores, workers, threads, want_workers, want_threads;
  };
  const Case cases[] = {
      {1, 0, 0, 1, 1}, {2, 0, 0, 2, 1}, {8, 0, 0, 4, 2}, {16, 0, 0, 4, 4},
      {8, 2, 0, 2, 4}, {8, 0, 3, 4, 3}, {0, 0, 0, 1, 1},
  };
  for (const Case& c : cases) {
    SchedulerOptions o;
    o.cpu_workers = c.workers;
    o.intra_op_threads = c.threads;
    SchedulerOptions sized = WithThreadsSized(o, c.cores);
    EXPECT_EQ(sized.cpu_workers, c.want_workers) << "cores " << c.cores;
    EXPECT_EQ(sized.intra_op_threads, c.want_threads) << "cores " << c.cores;
  }
}

TEST(ThreadSizing, ModelRunsAtOnceFollowTheWorkersThatMayRunTheModel) {
  struct Case {
    DeviceKind kind;
    int cpu_workers, accelerator_workers;
    uint32_t accelerator_instances;
    int want;
  };
  const Case cases[] = {
      {DeviceKind::kCpu, 2, 1, 0, 2},  {DeviceKind::kCpu, 4, 1, 8, 4},  // instances are an accelerator's
      {DeviceKind::kCpu, 0, 1, 0, 1},                                   // unsized: at least one
      {DeviceKind::kCuda, 2, 1, 0, 1}, {DeviceKind::kCuda, 2, 3, 0, 3},     {DeviceKind::kCuda, 2, 1, 4, 4},
      {DeviceKind::kMps, 2, 2, 1, 2},  {DeviceKind::kCuda, 2, 1, 1000, 64},  // kMaxAcceleratorInstances
  };
  for (const Case& c : cases) {
    SchedulerOptions o;
    o.cpu_workers = c.cpu_workers;
    o.accelerator_workers = c.accelerator_workers;
    v1::ModelConfig config;
    config.set_accelerator_instances(c.accelerator_instances);
    EXPECT_EQ(ModelRunsAtOnce(o, c.kind, config), c.want)
        << DeviceKindName(c.kind) << " cpu_workers " << c.cpu_workers << " accelerator_workers "
        << c.accelerator_workers << " instances " << c.accelerator_instances;
  }
}

}  // namespace
}  // namespace infergate
