#include "scheduler/routing/ready_path.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace infergate {
namespace {

// The rule as one table: a model wanted on cuda:0 (4x faster than the
// CPU), its candidates cuda:0 and the cpu, and which path a request takes.
// Figures in microseconds; `load` is cuda:0's load estimate (learned load
// time plus the link's queue), unset while no load there was measured.
struct ReadyRow {
  const char* what;
  bool on_cuda, on_cpu;          // resident there
  size_t cuda_ahead, cpu_ahead;  // requests queued or running there (one worker each)
  std::optional<double> load;
  ReadyPath path;
  const char* device;          // where it runs
  double expected;             // its estimated completion
  bool when_taken = false;     // --load-on-arrival=false: the load waits for the worker
  bool previous_rule = false;  // --load-and-run=false: path 1 alone
};

TEST(ReadyPath, TheFastestPathReadyWhenTheRequestArrives) {
  const double kCuda = 10'000, kCpu = 40'000;
  const ReadyRow rows[] = {
      {"resident on its best device: runs there", true, true, 0, 0, 5'000, ReadyPath::kIdeal, "cuda:0", 10'000},
      {"resident nowhere: a cold start where auto sends it", false, false, 0, 0, std::nullopt, ReadyPath::kColdStart,
       "cuda:0", 0},
      {"resident nowhere, load measured: a cold start with its estimate", false, false, 0, 0, 5'000,
       ReadyPath::kColdStart, "cuda:0", 15'000},
      {"a load never measured there is not guessed: the cpu copy", false, true, 0, 0, std::nullopt,
       ReadyPath::kResident, "cpu", 40'000},
      {"load and run (5 + 10 ms) beats the cpu (40 ms)", false, true, 0, 0, 5'000, ReadyPath::kLoadAndRun, "cuda:0",
       15'000},
      {"a slow load (35 + 10 ms) loses to the cpu (40 ms)", false, true, 0, 0, 35'000, ReadyPath::kResident, "cpu",
       40'000},
      {"a tie keeps the resident copy (it moves no bytes)", false, true, 0, 0, 30'000, ReadyPath::kResident, "cpu",
       40'000},
      {"the cpu's queue counts: two ahead there (120 ms) against a 50 ms load", false, true, 0, 2, 50'000,
       ReadyPath::kLoadAndRun, "cuda:0", 60'000},
      {"cuda:0's queue counts too: three ahead there (40 ms) plus a 5 ms load", false, true, 3, 0, 5'000,
       ReadyPath::kResident, "cpu", 40'000},
      {"the link's queue is in the load estimate: a move ahead makes it 45 ms", false, true, 0, 0, 5'000 + 40'000,
       ReadyPath::kResident, "cpu", 40'000},
      {"load on arrival: the load (25 ms) runs while the two ahead on cuda:0 (20 ms) do: 35 ms beats the cpu's 40",
       false, true, 2, 0, 25'000, ReadyPath::kLoadAndRun, "cuda:0", 35'000},
      {"load on arrival, the wait the longer: two ahead (20 ms), a 5 ms load, its run: 30 ms", false, true, 2, 0, 5'000,
       ReadyPath::kLoadAndRun, "cuda:0", 30'000},
      {"loaded when taken: the same load after the wait, 25 + 20 + 10 ms, loses to the cpu's 40", false, true, 2, 0,
       25'000, ReadyPath::kResident, "cpu", 40'000, true},
      {"loaded when taken: a 5 ms load after the wait, 5 + 20 + 10 ms", false, true, 2, 0, 5'000,
       ReadyPath::kLoadAndRun, "cuda:0", 35'000, true},
      {"the previous rule: the cpu copy (40 ms) although load and run (5 + 10 ms) is faster", false, true, 0, 0, 5'000,
       ReadyPath::kResident, "cpu", 40'000, false, true},
      {"the previous rule: resident on its best device, it runs there", true, true, 0, 0, 5'000, ReadyPath::kIdeal,
       "cuda:0", 10'000, false, true},
      {"the previous rule: resident nowhere, still a cold start with its estimate", false, false, 0, 0, 5'000,
       ReadyPath::kColdStart, "cuda:0", 15'000, false, true},
  };
  for (const ReadyRow& r : rows) {
    SCOPED_TRACE(r.what);
    RouteCandidate cuda, cpu;
    cuda.device = {DeviceKind::kCuda, 0};
    cuda.resident = r.on_cuda;
    cuda.queued = r.cuda_ahead;
    cuda.latency_us = kCuda;
    cuda.load_us = r.load;
    cpu.device = {DeviceKind::kCpu, 0};
    cpu.resident = r.on_cpu;
    cpu.queued = r.cpu_ahead;
    cpu.latency_us = kCpu;
    const std::vector<RouteCandidate> candidates = {cuda, cpu};
    // Where it would run were it resident everywhere, as the planner finds it.
    std::vector<RouteCandidate> all_resident = candidates;
    for (RouteCandidate& c : all_resident) c.resident = true;
    const int ideal = ChooseDevice(all_resident);
    ASSERT_EQ(ideal, 0) << "cuda:0 is the best device in every row";
    RouterOptions options;
    options.load_on_arrival = !r.when_taken;
    options.load_and_run = !r.previous_rule;
    const PathChoice choice = ChooseReadyPath(candidates, ideal, options);
    EXPECT_EQ(choice.path, r.path);
    ASSERT_GE(choice.index, 0);
    EXPECT_EQ(candidates[choice.index].device.ToString(), r.device);
    EXPECT_DOUBLE_EQ(choice.expected_us, r.expected);
  }
}

// The path not taken is reported beside the one taken, for the trace.
TEST(ReadyPath, ReportsThePathNotTaken) {
  RouteCandidate cuda, cpu;
  cuda.device = {DeviceKind::kCuda, 0};
  cuda.latency_us = 10'000;
  cuda.load_us = 5'000;
  cpu.device = {DeviceKind::kCpu, 0};
  cpu.resident = true;
  cpu.latency_us = 40'000;
  PathChoice choice = ChooseReadyPath({cuda, cpu}, 0, RouterOptions{});
  EXPECT_EQ(choice.path, ReadyPath::kLoadAndRun);
  EXPECT_DOUBLE_EQ(choice.alternative_us, 40'000);
  cuda.load_us.reset();
  choice = ChooseReadyPath({cuda, cpu}, 0, RouterOptions{});
  EXPECT_EQ(choice.path, ReadyPath::kResident);
  EXPECT_DOUBLE_EQ(choice.alternative_us, 0) << "no load estimate: no alternative";
  cuda.load_us = 5'000;
  RouterOptions previous_rule;
  previous_rule.load_and_run = false;
  choice = ChooseReadyPath({cuda, cpu}, 0, previous_rule);
  EXPECT_EQ(choice.path, ReadyPath::kResident);
  EXPECT_DOUBLE_EQ(choice.alternative_us, 0) << "the previous rule has no load and run to report";
  EXPECT_EQ(ChooseReadyPath({}, -1, RouterOptions{}).index, -1);
}

// Regret: finished more than 20% after the taken path's estimate; never
// without an estimate.
TEST(ReadyPath, RegretIsMoreThanTwentyPercentPastTheEstimate) {
  struct RegretRow {
    double expected, took;
    bool regret;
  };
  for (const RegretRow& row : std::vector<RegretRow>{{10'000, 10'000, false},
                                                     {10'000, 12'000, false},
                                                     {10'000, 12'001, true},
                                                     {10'000, 3'000, false},
                                                     {0, 1'000'000, false},
                                                     {-1, 5, false}}) {
    EXPECT_EQ(IsRegret(row.expected, row.took), row.regret) << row.expected << " " << row.took;
  }
  EXPECT_STREQ(ReadyPathName(ReadyPath::kIdeal), "ideal");
  EXPECT_STREQ(ReadyPathName(ReadyPath::kResident), "resident");
  EXPECT_STREQ(ReadyPathName(ReadyPath::kLoadAndRun), "load_and_run");
  EXPECT_STREQ(ReadyPathName(ReadyPath::kColdStart), "cold_start");
}

}  // namespace
}  // namespace infergate
