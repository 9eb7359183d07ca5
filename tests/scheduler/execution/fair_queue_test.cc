// The fair queue's choices, on a clock the test controls: fairness by
// device time, priorities with aging, per-model caps and queue timeouts.

#include "scheduler/execution/fair_queue.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "tests/scheduler/execution/policy_routed_job.h"

namespace infergate {
namespace {

using std::chrono::milliseconds;

const Clock::time_point kT0 = Clock::now();

// "model:version" as a flow key.
FlowKey Flow(const std::string& text) {
  const size_t colon = text.find(':');
  return {text.substr(0, colon), colon == std::string::npos ? 0 : std::stoll(text.substr(colon + 1))};
}

// `job` under a policy of its own, changed from the default by `change`.
template <typename Change>
void SetPolicy(Job& job, Change change) {
  SchedulingPolicy policy;
  change(policy);
  testing::RouteWithPolicy(job, std::move(policy));
}

std::shared_ptr<Job> MakeQueuedJob(const std::string& flow, int id, Clock::time_point enqueued = kT0,
                                   uint32_t level = 1) {
  auto job = std::make_shared<Job>();
  job->flow = Flow(flow);
  job->priority_level = level;
  job->enqueued = enqueued;
  job->request.version = std::to_string(id);  // the test's id
  return job;
}

int Id(const std::shared_ptr<Job>& job) { return job ? std::stoi(job->request.version) : -1; }

// Takes the next job and settles it at `cost_us` of device time.
std::shared_ptr<Job> RunNext(FairQueue& q, Clock::time_point now, double cost_us) {
  double charged = 0;
  std::shared_ptr<Job> job = q.Next(now, &charged);
  if (job) q.Settle(job->flow, charged, cost_us);
  return job;
}

TEST(FairQueue, ACheapModelWaitsForRunningWorkNotForAnotherModelsBacklog) {
  FairQueue q;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(q.Push(MakeQueuedJob("heavy:1", i), kT0).ok());
  ASSERT_EQ(Id(RunNext(q, kT0, 20000)), 0);  // one heavy batch ran
  ASSERT_TRUE(q.Push(MakeQueuedJob("light:1", 1000, kT0 + milliseconds(1)), kT0 + milliseconds(1)).ok());
  EXPECT_EQ(Id(RunNext(q, kT0 + milliseconds(2), 100)), 1000);  // ahead of 99 queued heavy jobs
  EXPECT_EQ(q.size(), 99u);
}

// The same with a backlog that has waited: a heavy model's requests arrive
// every 10 ms for a second, each batch taking 20 ms, so its queue holds
// requests that waited up to half a second when the light one arrives.
// Aging orders priority levels, not the requests of one level: the light
// request still goes next (it went after every heavy request that had
// waited 100 ms longer than it, about 40 of them, when aging ordered them).
TEST(FairQueue, ACheapModelGoesAheadOfABacklogThatHasWaited) {
  FairQueue q;  // aging on (100 ms)
  int heavy = 0;
  Clock::time_point now = kT0;
  for (int ms = 0; ms < 1000; ms += 10) {
    now = kT0 + milliseconds(ms);
    ASSERT_TRUE(q.Push(MakeQueuedJob("heavy:1", heavy++, now), now).ok());
    if (ms % 20 == 0) {
      ASSERT_NE(RunNext(q, now, 20'000), nullptr);
    }
  }
  ASSERT_GT(q.size(), 40u);
  now += milliseconds(1);
  ASSERT_TRUE(q.Push(MakeQueuedJob("light:1", 1000, now), now).ok());
  EXPECT_EQ(Id(RunNext(q, now + milliseconds(1), 100)), 1000);
}

// Rule 3 as a table: a busy model's request, routed on an estimate that
// holds only if it starts by `start_by`, and a lighter model's later one
// that fair sharing would run first. The fair turn gives way only where
// running it would break the busy request's promise, and never across
// priority levels.
TEST(FairQueue, AFairTurnGivesWayToARequestWhoseEstimateItWouldBreak) {
  struct Row {
    const char* why;
    std::optional<int> busy_start_by_ms;  // from kT0; unset: no estimate
    int64_t light_expected_us;
    uint32_t busy_level, light_level;
    int first;
  };
  const Row rows[] = {
      {"no promise: the lighter flow first, as fair sharing has it", std::nullopt, 10'000, 1, 1, 2},
      {"the light run would end past the busy request's latest start: the busy one first", 5, 10'000, 1, 1, 1},
      {"its latest start comes after the light run's end: fair", 50, 10'000, 1, 1, 2},
      {"a light run of unknown compute ends now: fair", 5, 0, 1, 1, 2},
      {"a promise already broken (its latest start 1 ms ago) claims nothing: fair", 1, 10'000, 1, 1, 2},
      {"a promise does not outrank a higher priority", 5, 10'000, 2, 1, 2},
  };
  for (const Row& row : rows) {
    FairQueue q;
    ASSERT_TRUE(q.Push(MakeQueuedJob("busy:1", 0), kT0).ok());
    ASSERT_EQ(Id(RunNext(q, kT0, 20'000)), 0);  // the busy model has used the device
    auto busy = MakeQueuedJob("busy:1", 1, kT0, row.busy_level);
    busy->expected_us = 40'000;
    if (row.busy_start_by_ms) busy->start_by = kT0 + milliseconds(*row.busy_start_by_ms);
    auto light = MakeQueuedJob("light:1", 2, kT0 + milliseconds(1), row.light_level);
    light->expected_us = row.light_expected_us;
    ASSERT_TRUE(q.Push(busy, kT0).ok());
    ASSERT_TRUE(q.Push(light, kT0 + milliseconds(1)).ok());
    EXPECT_EQ(Id(RunNext(q, kT0 + milliseconds(2), 100)), row.first) << row.why;
  }
}

TEST(FairQueue, TwoFloodedModelsShareDeviceTimeNotRequestCounts) {
  FairQueue q;
  const std::map<std::string, double> cost_us = {{"cheap:1", 1000}, {"costly:1", 4000}};
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(q.Push(MakeQueuedJob("cheap:1", i), kT0).ok());
    ASSERT_TRUE(q.Push(MakeQueuedJob("costly:1", i), kT0).ok());
  }
  std::map<std::string, double> used_us;
  std::map<std::string, int> runs;
  for (int i = 0; i < 500; ++i) {
    std::shared_ptr<Job> job = RunNext(q, kT0, 0);
    ASSERT_NE(job, nullptr);
    // Settle again with the real cost (RunNext charged 0 measured time).
    const std::string flow = job->flow.ToString();
    q.Settle(job->flow, 0, cost_us.at(flow));
    used_us[flow] += cost_us.at(flow);
    runs[flow]++;
  }
  double share = used_us["cheap:1"] / (used_us["cheap:1"] + used_us["costly:1"]);
  EXPECT_NEAR(share, 0.5, 0.05) << "cheap ran " << runs["cheap:1"] << ", costly " << runs["costly:1"];
  EXPECT_NEAR(static_cast<double>(runs["cheap:1"]) / runs["costly:1"], 4.0, 0.5);
}

TEST(FairQueue, AFlowThatWasIdleEarnsNoCredit) {
  FairQueue q;
  // "late" ran once long ago, then was idle while "busy" used the device.
  ASSERT_TRUE(q.Push(MakeQueuedJob("late:1", 0), kT0).ok());
  RunNext(q, kT0, 1000);
  for (int i = 1; i <= 50; ++i) {
    ASSERT_TRUE(q.Push(MakeQueuedJob("busy:1", i), kT0).ok());
    RunNext(q, kT0, 1000);
  }
  for (int i = 100; i < 110; ++i) ASSERT_TRUE(q.Push(MakeQueuedJob("busy:1", i), kT0).ok());
  for (int i = 200; i < 210; ++i) ASSERT_TRUE(q.Push(MakeQueuedJob("late:1", i), kT0).ok());
  // Had it kept its old virtual time, "late" would now run 10 times in a row.
  int late_in_a_row = 0;
  while (Id(RunNext(q, kT0, 1000)) >= 200) ++late_in_a_row;
  EXPECT_LE(late_in_a_row, 2);
}

TEST(FairQueue, HigherPriorityRunsFirstAcrossAndWithinModels) {
  FairQueue q(milliseconds(0));  // no aging
  ASSERT_TRUE(q.Push(MakeQueuedJob("a:1", 3, kT0, 3), kT0).ok());
  ASSERT_TRUE(q.Push(MakeQueuedJob("b:1", 2, kT0, 2), kT0).ok());
  ASSERT_TRUE(q.Push(MakeQueuedJob("a:1", 1, kT0, 1), kT0).ok());
  ASSERT_TRUE(q.Push(MakeQueuedJob("b:1", 4, kT0, 3), kT0).ok());
  EXPECT_EQ(Id(RunNext(q, kT0, 10)), 1);
  EXPECT_EQ(Id(RunNext(q, kT0, 10)), 2);
  int third = Id(RunNext(q, kT0, 10)), fourth = Id(RunNext(q, kT0, 10));
  EXPECT_TRUE((third == 3 && fourth == 4) || (third == 4 && fourth == 3));
}

TEST(FairQueue, LowPriorityAgesInsteadOfStarving) {
  FairQueue q(milliseconds(100));
  ASSERT_TRUE(q.Push(MakeQueuedJob("low:1", 0, kT0, 5), kT0).ok());
  // A steady stream of fresh level-1 work from another model.
  int id = 1;
  Clock::time_point now = kT0;
  int low_ran_at_ms = -1;
  for (int ms = 0; ms <= 1000 && low_ran_at_ms < 0; ms += 10) {
    now = kT0 + milliseconds(ms);
    ASSERT_TRUE(q.Push(MakeQueuedJob("high:1", id++, now, 1), now).ok());
    if (Id(RunNext(q, now, 10)) == 0) low_ran_at_ms = ms;
  }
  // Level 5 reaches level 1 after 400 ms and outranks fresh level-1 work
  // after 500 ms at the latest.
  EXPECT_GE(low_ran_at_ms, 400);
  EXPECT_LE(low_ran_at_ms, 500);
}

// In a busy queue the higher work waits too. A level-3 job that has waited
// two agings longer than a level-1 job outranks it: both have aged past
// level 0, and their order still follows level minus wait (a floor at 0
// once made them tie, and the level-1 job won every tie).
TEST(FairQueue, LowPriorityOutranksHigherWorkThatWaitedLessByTheLevelGap) {
  FairQueue q(milliseconds(100));
  ASSERT_TRUE(q.Push(MakeQueuedJob("m:1", 0, kT0, 3), kT0).ok());
  ASSERT_TRUE(q.Push(MakeQueuedJob("m:1", 1, kT0 + milliseconds(300), 1), kT0 + milliseconds(300)).ok());
  // At 500 ms: level 3 - 5 = -2 against level 1 - 2 = -1.
  EXPECT_EQ(Id(RunNext(q, kT0 + milliseconds(500), 10)), 0);
  // Less than the gap: the level-1 job first.
  FairQueue close(milliseconds(100));
  ASSERT_TRUE(close.Push(MakeQueuedJob("m:1", 0, kT0, 3), kT0).ok());
  ASSERT_TRUE(close.Push(MakeQueuedJob("m:1", 1, kT0 + milliseconds(100), 1), kT0 + milliseconds(100)).ok());
  EXPECT_EQ(Id(RunNext(close, kT0 + milliseconds(500), 10)), 1);
}

TEST(FairQueue, AModelsCapRefusesThatModelAlone) {
  FairQueue q;
  for (int i = 0; i < 2; ++i) {
    auto job = MakeQueuedJob("capped:1", i);
    SetPolicy(*job, [](SchedulingPolicy& p) { p.max_queue_size = 2; });
    ASSERT_TRUE(q.Push(job, kT0).ok());
  }
  auto third = MakeQueuedJob("capped:1", 2);
  SetPolicy(*third, [](SchedulingPolicy& p) { p.max_queue_size = 2; });
  absl::Status refused = q.Push(third, kT0);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("capped:1"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("max_queue_size"), std::string::npos) << refused;
  for (int i = 10; i < 20; ++i) EXPECT_TRUE(q.Push(MakeQueuedJob("free:1", i), kT0).ok());
  RunNext(q, kT0, 10);
  RunNext(q, kT0, 10);
  RunNext(q, kT0, 10);  // at least one capped job left the queue
  SetPolicy(*third, [](SchedulingPolicy& p) { p.max_queue_size = 2; });
  EXPECT_TRUE(q.Push(third, kT0).ok());
}

TEST(FairQueue, RejectTimeoutsAreTakenOutAndDelayTimeoutsRunLast) {
  FairQueue q(milliseconds(0));
  auto reject = MakeQueuedJob("m:1", 1);
  reject->queue_deadline = kT0 + milliseconds(10);
  ASSERT_TRUE(q.Push(reject, kT0).ok());
  EXPECT_TRUE(q.TakeExpired(kT0 + milliseconds(5)).empty());
  std::vector<std::shared_ptr<Job>> expired = q.TakeExpired(kT0 + milliseconds(10));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(Id(expired[0]), 1);
  EXPECT_TRUE(q.empty());

  auto delay = MakeQueuedJob("m:1", 2, kT0, 1);
  delay->queue_deadline = kT0 + milliseconds(10);
  SetPolicy(*delay, [](SchedulingPolicy& p) { p.delay_on_timeout = true; });
  ASSERT_TRUE(q.Push(delay, kT0).ok());
  ASSERT_TRUE(q.Push(MakeQueuedJob("other:1", 3, kT0 + milliseconds(20), 9), kT0 + milliseconds(20)).ok());
  EXPECT_TRUE(q.TakeExpired(kT0 + milliseconds(30)).empty());  // DELAY jobs stay
  EXPECT_EQ(Id(RunNext(q, kT0 + milliseconds(30), 10)), 3);    // even level 9 goes first
  EXPECT_EQ(Id(RunNext(q, kT0 + milliseconds(30), 10)), 2);    // then the delayed job runs
}

// On an accelerator's queue a model's accelerator_instances caps its
// running batches below the device's limit; other models keep theirs, and
// the CPU's queue does not read it.
TEST(FairQueue, AModelsInstancesCapItsRunningBatchesOnAnAccelerator) {
  for (const bool accelerator : {true, false}) {
    SCOPED_TRACE(accelerator ? "accelerator" : "cpu");
    FairQueue q(milliseconds(0), /*fair=*/true, /*model_instances=*/accelerator);
    for (int i = 0; i < 3; ++i) {
      auto job = MakeQueuedJob("one:1", i);
      SetPolicy(*job, [](SchedulingPolicy& p) { p.accelerator_instances = 1; });
      ASSERT_TRUE(q.Push(job, kT0).ok());
    }
    for (int i = 10; i < 13; ++i) ASSERT_TRUE(q.Push(MakeQueuedJob("any:1", i), kT0).ok());
    const int device_limit = 2;
    std::map<std::string, int> running;
    for (std::shared_ptr<Job> job; (job = q.Next(kT0, nullptr, device_limit));) ++running[job->flow.model];
    EXPECT_EQ(running["one"], accelerator ? 1 : 2);
    EXPECT_EQ(running["any"], 2);
    EXPECT_FALSE(q.HasRunnable(device_limit));
    q.Settle(Flow("one:1"), 0, 10);
    EXPECT_TRUE(q.HasRunnable(device_limit));
    std::shared_ptr<Job> next = q.Next(kT0, nullptr, device_limit);
    ASSERT_NE(next, nullptr);
    EXPECT_EQ(next->flow.model, "one");
  }
}

TEST(FairQueue, FifoModeServesTheOldestJobFirst) {
  FairQueue q(milliseconds(0), /*fair=*/false);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(q.Push(MakeQueuedJob("heavy:1", i, kT0 + milliseconds(i)), kT0).ok());
  ASSERT_TRUE(q.Push(MakeQueuedJob("light:1", 100, kT0 + milliseconds(10)), kT0).ok());
  RunNext(q, kT0 + milliseconds(11), 20000);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(Id(RunNext(q, kT0 + milliseconds(11), 20000)), i);
  EXPECT_EQ(Id(RunNext(q, kT0 + milliseconds(11), 100)), 100);
}

TEST(FairQueue, CompanionsComeFromTheSameModelBestLevelFirst) {
  FairQueue q(milliseconds(0));
  auto make = [](const std::string& flow, int id, uint32_t level) {
    auto job = MakeQueuedJob(flow, id, kT0, level);
    job->batch_key = flow + "|x";
    SetPolicy(*job, [](SchedulingPolicy& p) { p.max_batch_rows = 3; });
    return job;
  };
  ASSERT_TRUE(q.Push(make("m:1", 1, 1), kT0).ok());
  ASSERT_TRUE(q.Push(make("other:1", 2, 1), kT0).ok());
  ASSERT_TRUE(q.Push(make("m:1", 3, 3), kT0).ok());
  ASSERT_TRUE(q.Push(make("m:1", 4, 2), kT0).ok());
  ASSERT_TRUE(q.Push(make("m:1", 5, 2), kT0).ok());
  std::shared_ptr<Job> first = q.Next(kT0);
  ASSERT_EQ(Id(first), 1);
  std::vector<std::shared_ptr<Job>> batch;
  int64_t rows = first->rows;
  q.CollectCompanions(*first, &rows, &batch);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(Id(batch[0]), 4);
  EXPECT_EQ(Id(batch[1]), 5);
  EXPECT_EQ(q.DepthByFlow(), (std::map<FlowKey, size_t>{{Flow("m:1"), 1}, {Flow("other:1"), 1}}));
}

}  // namespace
}  // namespace infergate
