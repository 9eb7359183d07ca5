#include "scheduler/routing/auto_cost.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

RouteCandidate C(DeviceKind kind, int index, size_t queued, size_t running, int workers, bool resident,
                 std::optional<double> latency) {
  RouteCandidate c;
  c.device = {kind, index};
  c.queued = queued;
  c.running = running;
  c.workers = workers;
  c.resident = resident;
  c.latency_us = latency;
  return c;
}

TEST(Router, ColdStartPrefersCudaThenMpsThenCpu) {
  std::vector<RouteCandidate> cold = {C(DeviceKind::kCuda, 0, 0, 0, 1, false, {}),
                                      C(DeviceKind::kMps, 0, 0, 0, 1, false, {}),
                                      C(DeviceKind::kCpu, 0, 0, 0, 2, false, {})};
  EXPECT_EQ(ChooseDevice(cold), 0);
  cold.erase(cold.begin());
  EXPECT_EQ(ChooseDevice(cold), 0);  // mps
  EXPECT_EQ(ChooseDevice({}), -1);
}

TEST(Router, UnevenQueuesMoveWorkToTheFreerDevice) {
  // cuda is 4x faster per request but has 20 queued; cpu is idle.
  std::vector<RouteCandidate> c = {C(DeviceKind::kCuda, 0, 20, 1, 1, true, 250.0),
                                   C(DeviceKind::kCpu, 0, 0, 0, 2, true, 1000.0)};
  EXPECT_EQ(ChooseDevice(c), 1);
  c[0].queued = 1;
  EXPECT_EQ(ChooseDevice(c), 0);
}

// The start as the executor estimates it (starts_in_us: the running
// batches' remaining time and the queued jobs' own expected compute over
// the threads, start_estimate.h), then the request's own run: a quick
// model's request behind one 130 ms job waits for that job, not for one of
// its own 5 ms runs (which the count of jobs alone assumed); a slow model's
// request behind ten quick jobs waits for 50 ms, not ten of its own runs.
TEST(Router, TheRequestStartsWhenTheExecutorEstimatesAndThenRuns) {
  // clang-format off: a table, one row a line
  struct Row { size_t queued, running; int workers; double latency; std::optional<double> starts_in; double expected; };
  const Row rows[] = {
      {0, 1, 1, 5'000, 130'000.0, 135'000},    // behind a slow job
      {0, 1, 1, 5'000, {}, 10'000},            // the count alone: one of its own
      {10, 0, 1, 130'000, 50'000.0, 180'000},  // behind ten quick ones
      {10, 0, 1, 130'000, {}, 1'430'000},      // the count alone: ten of its own
      {3, 1, 2, 10'000, 40'000.0, 50'000},     // the threads' share is the executor's to estimate
      {3, 1, 2, 10'000, {}, 30'000},           // the count alone: its runs over the workers
      {0, 1, 2, 10'000, 0.0, 10'000},          // a free thread starts it at once
  };
  // clang-format on
  for (const Row& row : rows) {
    RouteCandidate c = C(DeviceKind::kCpu, 0, row.queued, row.running, row.workers, true, row.latency);
    c.starts_in_us = row.starts_in;
    EXPECT_DOUBLE_EQ(ExpectedCompletionUs(c, RouterOptions{}), row.expected)
        << row.queued << " queued, " << row.running << " running, starts in " << row.starts_in.value_or(-1);
  }
}

TEST(Router, LoadPenaltyKeepsWorkWhereTheModelIsResident) {
  std::vector<RouteCandidate> c = {C(DeviceKind::kCuda, 0, 0, 0, 1, false, 100.0),
                                   C(DeviceKind::kCpu, 0, 2, 0, 2, true, 1000.0)};
  EXPECT_EQ(ChooseDevice(c), 1);  // 2000 us on cpu beats 100 us + 50 ms load on cuda
  RouterOptions cheap_loads;
  cheap_loads.load_penalty_us = 100;
  EXPECT_EQ(ChooseDevice(c, cheap_loads), 0);
}

TEST(LatencyStats, MovingAverageFromTheSecondSample) {
  LatencyStats stats(0.5);
  DeviceId cpu{DeviceKind::kCpu, 0};
  EXPECT_FALSE(stats.Mean("m", cpu).has_value());
  stats.Observe("m", cpu, 5000);  // a first run, with lazy initialisation
  EXPECT_FALSE(stats.Mean("m", cpu).has_value()) << "one sample is not a measurement";
  stats.Observe("m", cpu, 100);
  EXPECT_DOUBLE_EQ(*stats.Mean("m", cpu), 100) << "the first sample seeded the average";
  stats.Observe("m", cpu, 200);
  EXPECT_DOUBLE_EQ(*stats.Mean("m", cpu), 150);
  EXPECT_FALSE(stats.Mean("m", {DeviceKind::kCuda, 0}).has_value());
}

// A warm-up's timed run is what a request is expected to take while
// requests have measured nothing (or only a first, lazily initialising
// run); once they have, their average is. Mean, the move policy's, is the
// requests' alone.
TEST(LatencyStats, AWarmUpsTimedRunIsTheExpectationUntilRequestsMeasure) {
  LatencyStats stats(0.5);
  const DeviceId cpu{DeviceKind::kCpu, 0};
  EXPECT_FALSE(stats.Expected("m", cpu).has_value());
  stats.Seed("m", cpu, 300);
  EXPECT_DOUBLE_EQ(*stats.Expected("m", cpu), 300) << "the seed, nothing else measured";
  EXPECT_FALSE(stats.Mean("m", cpu).has_value()) << "no request measured it";
  stats.Observe("m", cpu, 5000);  // a first run, with lazy initialisation
  EXPECT_DOUBLE_EQ(*stats.Expected("m", cpu), 300) << "one request's run is not a measurement";
  stats.Observe("m", cpu, 100);
  stats.Observe("m", cpu, 200);
  EXPECT_DOUBLE_EQ(*stats.Expected("m", cpu), 150) << "the requests' average";
  EXPECT_DOUBLE_EQ(*stats.Mean("m", cpu), 150);
  stats.Seed("m", cpu, 1000);
  EXPECT_DOUBLE_EQ(*stats.Expected("m", cpu), 150) << "a later warm-up does not override the requests";
  EXPECT_FALSE(stats.Expected("m", {DeviceKind::kCuda, 0}).has_value());
}

// The latencies not measured, guessed from the measured ones at an
// assumed speedup of 4: the accelerators' from the CPU's, else the CPU's
// from the fastest accelerator's.
TEST(AutoCost, UnmeasuredLatenciesAreGuessedFromTheMeasuredAtTheAssumedSpeedup) {
  RouterOptions options;
  options.assumed_accelerator_speedup = 4;
  using L = std::optional<double>;
  struct Row {
    L cuda0, cuda1, cpu;                 // measured (or not)
    L want_cuda0, want_cuda1, want_cpu;  // after the guesses
  };
  const Row rows[] = {
      {{}, 900, 400, 100, 900, 400},     // an accelerator from the cpu; the measured kept
      {{}, {}, {}, {}, {}, {}},          // nothing measured: nothing to go by
      {{}, 900, {}, {}, 900, 3600},      // the cpu from the accelerator
      {300, 900, {}, 300, 900, 1200},    // from the fastest accelerator
      {300, 900, 2000, 300, 900, 2000},  // all measured: unchanged
  };
  for (const Row& r : rows) {
    std::vector<RouteCandidate> c(3);
    c[0].device = {DeviceKind::kCuda, 0};
    c[1].device = {DeviceKind::kCuda, 1};
    c[2].device = {DeviceKind::kCpu, 0};
    c[0].latency_us = r.cuda0;
    c[1].latency_us = r.cuda1;
    c[2].latency_us = r.cpu;
    EstimateUnmeasuredLatencies(c, options);
    EXPECT_EQ(c[0].latency_us, r.want_cuda0);
    EXPECT_EQ(c[1].latency_us, r.want_cuda1);
    EXPECT_EQ(c[2].latency_us, r.want_cpu);
  }
}

}  // namespace
}  // namespace infergate
