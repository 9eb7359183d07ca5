#include "scheduler/execution/device_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "common/thread_name.h"
#include "tests/scheduler/execution/policy_routed_job.h"

namespace infergate {
namespace {

using Batch = DeviceExecutor::Batch;

// Records the batches the executor forms, as lists of job ids.
struct Recorder {
  std::mutex mu;
  std::vector<std::vector<int>> batches;
  DeviceExecutor::BatchRunner Runner() {
    return [this](Batch& batch) {
      std::vector<int> ids;
      for (auto& j : batch) {
        ids.push_back(static_cast<int>(j->request.precision == Precision::kAuto ? j->rows * 100 : 0) +
                      static_cast<int>(j->request.model.size()));
        j->Finish(InferenceResult{});
      }
      std::lock_guard<std::mutex> lock(mu);
      batches.push_back(ids);
    };
  }
  // The batches run so far, once one has run (or `patience` has passed).
  std::vector<std::vector<int>> OnceOneRan(std::chrono::milliseconds patience = std::chrono::milliseconds(2000)) {
    const Clock::time_point give_up = Clock::now() + patience;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!batches.empty() || Clock::now() >= give_up) return batches;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
};

std::shared_ptr<Job> MakeJob(const std::string& key, int64_t rows, uint32_t max_rows, int id, uint64_t delay_us = 0) {
  auto job = std::make_shared<Job>();
  job->batch_key = key;
  job->rows = rows;
  SchedulingPolicy policy;
  policy.max_batch_rows = max_rows;
  policy.max_queue_delay_us = delay_us;
  testing::RouteWithPolicy(*job, std::move(policy));
  job->request.model = std::string(id, 'x');  // the id, recoverable as a length
  job->enqueued = Clock::now();
  return job;
}

// Holds the executor's only worker until released.
struct Gate {
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  std::function<void()> Task() {
    return [this] {
      started.set_value();
      released.wait();
    };
  }
  // Keeps one of `ex`'s workers busy with Task() until release is set.
  void HoldAWorkerOf(DeviceExecutor& ex) {
    ASSERT_TRUE(ex.SubmitTask(Task()).ok());
    started.get_future().wait();
  }
};

TEST(DeviceExecutor, RunsEverythingQueuedBeforeStopping) {
  std::atomic<int> ran{0};
  DeviceExecutor ex({DeviceKind::kCpu, 0}, 2, 1000, [](Batch&) {});
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(ex.SubmitTask([&] { ran++; }).ok());
  ex.Stop();
  EXPECT_EQ(ran.load(), 500);
  absl::Status late = ex.SubmitTask([] {});
  EXPECT_EQ(late.code(), absl::StatusCode::kUnavailable);
}

// Workers carry the device in their thread name, for top -H and perf.
TEST(DeviceExecutor, WorkersAreNamedForTheirDevice) {
  DeviceExecutor ex({DeviceKind::kCuda, 1}, 1, 8, [](Batch&) {});
  std::promise<std::string> name;
  ASSERT_TRUE(ex.SubmitTask([&] { name.set_value(ThisThreadName()); }).ok());
  EXPECT_EQ(name.get_future().get(), "cuda:1 worker 0");
  ex.Stop();
}

TEST(DeviceExecutor, FullQueueIsResourceExhaustedNamingTheDevice) {
  Gate gate;
  DeviceExecutor ex({DeviceKind::kCuda, 1}, 1, 2, [](Batch&) {});
  ASSERT_NO_FATAL_FAILURE(gate.HoldAWorkerOf(ex));
  EXPECT_TRUE(ex.SubmitTask([] {}).ok());
  EXPECT_TRUE(ex.SubmitTask([] {}).ok());
  absl::Status full = ex.SubmitTask([] {});
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("cuda:1"), absl::string_view::npos);
  EXPECT_EQ(ex.queue_depth(), 2u);
  gate.release.set_value();
  ex.Stop();
  EXPECT_EQ(ex.queue_depth(), 0u);
}

TEST(DeviceExecutor, BatchesCompatibleJobsUpToMaxRowsInArrivalOrder) {
  Recorder rec;
  Gate gate;
  DeviceExecutor ex({DeviceKind::kCpu, 0}, 1, 100, rec.Runner());
  ASSERT_NO_FATAL_FAILURE(gate.HoldAWorkerOf(ex));
  // While the worker is busy: 5 one-row jobs for key A (max 4 rows), a job
  // for key B in between, and a 3-row A job that no longer fits the first batch.
  ASSERT_TRUE(ex.Submit(MakeJob("A", 1, 4, 1)).ok());
  ASSERT_TRUE(ex.Submit(MakeJob("A", 1, 4, 2)).ok());
  ASSERT_TRUE(ex.Submit(MakeJob("B", 1, 4, 3)).ok());
  ASSERT_TRUE(ex.Submit(MakeJob("A", 3, 4, 4)).ok());
  ASSERT_TRUE(ex.Submit(MakeJob("A", 1, 4, 5)).ok());
  ASSERT_TRUE(ex.Submit(MakeJob("A", 1, 4, 6)).ok());
  ASSERT_TRUE(ex.Submit(MakeJob("", 1, 4, 7)).ok());  // not batchable
  gate.release.set_value();
  ex.Stop();
  // ids are rows*100 + id
  std::vector<std::vector<int>> expected = {{101, 102, 105, 106}, {103}, {304}, {107}};
  EXPECT_EQ(rec.batches, expected);
}

TEST(DeviceExecutor, BatchesAreCutToTheSizeThatRunsFastest) {
  Recorder rec;
  Gate gate;
  DeviceExecutor ex({DeviceKind::kCpu, 0}, 1, 100, rec.Runner());
  // Measured on this device: 2 rows cost as little as 1, more rows a lot.
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t r = 1; r <= 8; ++r) ex.RecordBatchCost("A", r, r <= 2 ? 20 : 500);
  }
  ASSERT_NO_FATAL_FAILURE(gate.HoldAWorkerOf(ex));
  for (int id = 1; id <= 5; ++id) ASSERT_TRUE(ex.Submit(MakeJob("A", 1, 8, id)).ok());
  // Key P prefers batches of 3 rows, whatever they cost.
  for (int id = 6; id <= 9; ++id) {
    auto job = MakeJob("P", 1, 8, id);
    SchedulingPolicy policy = job->policy();
    policy.preferred_batch_rows.assign(1, 3);  // (GCC 14 misreads "= {3}" under the sanitizers as out of bounds)
    testing::RouteWithPolicy(*job, std::move(policy));
    ASSERT_TRUE(ex.Submit(job).ok());
  }
  gate.release.set_value();
  ex.Stop();
  // ids are rows*100 + id; the rest of a cut batch stays first in the queue.
  std::vector<std::vector<int>> expected = {{101, 102}, {103, 104}, {105}, {106, 107, 108}, {109}};
  EXPECT_EQ(rec.batches, expected);
}

// Submits a batchable job that may wait `delay_us` for companions and
// returns the microseconds until it is answered.
uint64_t MicrosToAnswerABatchableJob(DeviceExecutor& ex, uint64_t delay_us) {
  auto start = Clock::now();
  std::promise<void> done;
  auto job = MakeJob("A", 1, 8, 1, delay_us);
  job->set_done([&](absl::StatusOr<InferenceResult>, const RequestLabels&) { done.set_value(); });
  EXPECT_TRUE(ex.Submit(job).ok());
  done.get_future().wait();
  return MicrosBetween(start, Clock::now());
}

TEST(DeviceExecutor, IdleDeviceDoesNotWaitForABatch) {
  Recorder rec;
  DeviceExecutor ex({DeviceKind::kCpu, 0}, 1, 100, rec.Runner());
  EXPECT_LT(MicrosToAnswerABatchableJob(ex, /*delay_us=*/2'000'000), 1'000'000u);
  ex.Stop();
}

// An accelerator runs one batch at a time: while it is busy, the next batch
// may as well grow.
TEST(DeviceExecutor, BusyAcceleratorWaitsUpToTheQueueDelayForCompanions) {
  Recorder rec;
  Gate gate;
  DeviceExecutor ex({DeviceKind::kCuda, 0}, 2, 100, rec.Runner());
  ASSERT_NO_FATAL_FAILURE(gate.HoldAWorkerOf(ex));
  ASSERT_TRUE(ex.Submit(MakeJob("A", 1, 8, 1, /*delay_us=*/3'000'000)).ok());
  // The free worker takes job 1 and waits for more rows, since the device is busy.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(ex.Submit(MakeJob("A", 1, 8, 2)).ok());
  ASSERT_TRUE(ex.Submit(MakeJob("A", 6, 8, 3)).ok());  // fills the batch: no need to wait longer
  auto filled = Clock::now();
  rec.OnceOneRan(std::chrono::milliseconds(30'000));
  EXPECT_LT(MicrosBetween(filled, Clock::now()), 1'000'000u);
  gate.release.set_value();
  ex.Stop();
  ASSERT_FALSE(rec.batches.empty());
  EXPECT_EQ(rec.batches[0], (std::vector<int>{101, 102, 603}));
}

// A CPU worker has cores of its own: beside a busy worker it runs what it
// has instead of waiting out the queue delay.
TEST(DeviceExecutor, CpuWorkerBesideABusyOneDoesNotWaitForCompanions) {
  Recorder rec;
  Gate gate;
  DeviceExecutor ex({DeviceKind::kCpu, 0}, 2, 100, rec.Runner());
  ASSERT_NO_FATAL_FAILURE(gate.HoldAWorkerOf(ex));
  EXPECT_LT(MicrosToAnswerABatchableJob(ex, /*delay_us=*/3'000'000), 1'000'000u);
  gate.release.set_value();
  ex.Stop();
  EXPECT_EQ(rec.batches, (std::vector<std::vector<int>>{{101}}));
}

// Two CPU workers run jobs 1 and 2 (held); jobs 3 to 6 queue; job 1's worker
// is then let go and forms the next batch. Returns the batches run, as job
// ids, after the executor has learned `cost_us` per batch size of "A".
std::vector<std::vector<int>> BatchesBesideABusyWorker(const std::function<uint64_t(int64_t)>& cost_us) {
  std::mutex mu;
  std::vector<std::vector<int>> batches;
  std::map<int, std::shared_future<void>> holds;
  std::promise<void> release1, release2;
  holds[1] = release1.get_future().share();
  holds[2] = release2.get_future().share();
  std::atomic<int> running{0};
  DeviceExecutor ex({DeviceKind::kCpu, 0}, 2, 100, [&](Batch& batch) {
    std::vector<int> ids;
    for (auto& j : batch) ids.push_back(static_cast<int>(j->request.model.size()));
    {
      std::lock_guard<std::mutex> lock(mu);
      batches.push_back(ids);
    }
    running++;
    if (auto it = holds.find(ids[0]); it != holds.end()) it->second.wait();
    for (auto& j : batch) j->Finish(InferenceResult{});
  });
  for (int64_t rows = 1; rows <= 8; ++rows) {
    ex.RecordBatchCost("A", rows, cost_us(rows));
    ex.RecordBatchCost("A", rows, cost_us(rows));
  }
  auto wait_running = [&](int n) {
    while (running.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  EXPECT_TRUE(ex.Submit(MakeJob("A", 1, 8, 1)).ok());
  wait_running(1);
  EXPECT_TRUE(ex.Submit(MakeJob("A", 1, 8, 2)).ok());
  wait_running(2);  // both workers run (the fair-share thread takes no third batch of A)
  for (int id = 3; id <= 6; ++id) EXPECT_TRUE(ex.Submit(MakeJob("A", 1, 8, id)).ok());
  release1.set_value();
  wait_running(3);
  release2.set_value();
  ex.Stop();
  std::lock_guard<std::mutex> lock(mu);
  return batches;
}

// On the CPU each worker has cores of its own: where batching gains little
// (a conv net), a worker finishing beside a busy one takes its share of the
// rows in flight, not all it finds, so the other has work when it finishes.
TEST(DeviceExecutor, CpuWorkersShareTheRowsInFlightWhereBatchingGainsLittle) {
  // 4 queued + 1 running, shared by 2 workers: 3 rows.
  EXPECT_EQ(BatchesBesideABusyWorker([](int64_t rows) -> uint64_t { return 1000 * rows; }),
            (std::vector<std::vector<int>>{{1}, {2}, {3, 4, 5}, {6}}));
}

// Where a bigger batch is much faster per row (a Linear layer), one worker
// runs all it finds.
TEST(DeviceExecutor, CpuWorkerTakesAllWhereBatchingPays) {
  EXPECT_EQ(BatchesBesideABusyWorker([](int64_t rows) -> uint64_t { return 100 + 5 * rows; }),
            (std::vector<std::vector<int>>{{1}, {2}, {3, 4, 5, 6}}));
}

// The server's stop after its drain timeout: queued requests are answered
// UNAVAILABLE (counted as draining) and never run; the batch running
// finishes, and a queued task still runs.
TEST(DeviceExecutor, RefuseQueuedAnswersQueuedRequestsWithoutRunningThem) {
  Recorder rec;
  Gate gate;
  DeviceExecutor ex({DeviceKind::kCpu, 0}, 1, 100, rec.Runner());
  std::vector<RejectionReason> reasons;
  ex.set_rejection_listener([&](const Job&, RejectionReason r) { reasons.push_back(r); });
  ASSERT_NO_FATAL_FAILURE(gate.HoldAWorkerOf(ex));
  std::vector<absl::Status> answers(3);
  for (int id = 1; id <= 3; ++id) {
    auto job = MakeJob(id == 3 ? "" : "A", 1, 8, id);
    job->set_done(
        [&answers, id](absl::StatusOr<InferenceResult> r, const RequestLabels&) { answers[id - 1] = r.status(); });
    ASSERT_TRUE(ex.Submit(job).ok());
  }
  std::atomic<bool> task_ran{false};
  ASSERT_TRUE(ex.SubmitTask([&] { task_ran = true; }).ok());
  EXPECT_EQ(ex.RefuseQueued(absl::UnavailableError("stopping")), 3u);
  EXPECT_EQ(ex.queue_depth(), 1u) << "the task stays";
  for (const absl::Status& a : answers) EXPECT_EQ(a, absl::UnavailableError("stopping"));
  EXPECT_EQ(reasons, std::vector<RejectionReason>(3, RejectionReason::kDraining));
  gate.release.set_value();
  ex.Stop();
  EXPECT_TRUE(task_ran.load());
  EXPECT_TRUE(rec.batches.empty()) << "a refused request ran";
}

TEST(DeviceExecutor, CancelledJobsLeaveTheQueue) {
  Recorder rec;
  Gate gate;
  DeviceExecutor ex({DeviceKind::kCpu, 0}, 1, 100, rec.Runner());
  ASSERT_NO_FATAL_FAILURE(gate.HoldAWorkerOf(ex));
  auto job = MakeJob("", 1, 0, 1);
  absl::Status answer;
  job->set_done([&](absl::StatusOr<InferenceResult> r, const RequestLabels&) { answer = r.status(); });
  ASSERT_TRUE(ex.Submit(job).ok());
  ASSERT_TRUE(ex.Submit(MakeJob("", 1, 0, 2)).ok());
  EXPECT_EQ(ex.queue_depth(), 2u);
  job->cancelled = true;
  EXPECT_EQ(ex.PurgeCancelled(), 1u);
  EXPECT_EQ(ex.queue_depth(), 1u);
  EXPECT_EQ(answer.code(), absl::StatusCode::kCancelled);
  gate.release.set_value();
  ex.Stop();
  EXPECT_EQ(rec.batches, (std::vector<std::vector<int>>{{102}}));
}

// The work ahead (expected_work_us): each queued job's expected compute is
// counted from Submit until it ran, was cancelled or refused; a running
// job counts until its run ends.
TEST(DeviceExecutor, TheWorkAheadCountsEachJobsExpectedComputeUntilItIsDone) {
  Gate gate;
  std::promise<void> running, finish;
  std::shared_future<void> finished = finish.get_future().share();
  std::atomic<int> runs{0};
  DeviceExecutor ex({DeviceKind::kCpu, 0}, 1, 100, [&](Batch& batch) {
    if (runs++ == 0) {
      running.set_value();
      finished.wait();
    }
    for (auto& j : batch) j->Finish(InferenceResult{});
  });
  ASSERT_NO_FATAL_FAILURE(gate.HoldAWorkerOf(ex));
  EXPECT_EQ(ex.expected_work_us(), 0) << "a task is expected to take nothing";
  std::vector<std::shared_ptr<Job>> jobs;
  for (int id = 1; id <= 4; ++id) {
    jobs.push_back(MakeJob("", 1, 0, id));
    jobs.back()->expected_us = 1000 * id;
    ASSERT_TRUE(ex.Submit(jobs.back()).ok());
  }
  EXPECT_EQ(ex.expected_work_us(), 10'000);
  jobs[1]->cancelled = true;
  EXPECT_EQ(ex.PurgeCancelled(), 1u);
  EXPECT_EQ(ex.expected_work_us(), 8'000) << "the cancelled job's 2 ms left";
  gate.release.set_value();
  running.get_future().wait();  // job 1 runs, 3 and 4 wait
  EXPECT_EQ(ex.expected_work_us(), 8'000) << "a running job counts until its run ends";
  EXPECT_EQ(ex.RefuseQueued(absl::UnavailableError("stopping")), 2u);
  EXPECT_EQ(ex.expected_work_us(), 1'000) << "the refused jobs' 7 ms left";
  finish.set_value();
  ASSERT_TRUE(ex.WaitIdle(Clock::now() + std::chrono::seconds(30)));
  EXPECT_EQ(ex.expected_work_us(), 0);
  ex.Stop();
}

// What a job submitted now would find (LoadFor): a running batch holds its
// thread until its expected end, and no longer once it has answered; the
// queued jobs' expected compute; the fair-share thread, due, as a thread;
// a flow at its running limit waits for its own batch.
TEST(DeviceExecutor, TheLoadAJobWouldFindIsTheRunningBatchesRemainingTimeAndTheQueue) {
  std::promise<void> started, answered;
  std::promise<void> answer, end;
  std::shared_future<void> may_answer = answer.get_future().share(), may_end = end.get_future().share();
  DeviceExecutor ex({DeviceKind::kCpu, 0}, 1, 100, [&](Batch& batch) {
    if (batch[0]->expected_us == 50'000) {
      started.set_value();
      may_answer.wait();
      for (auto& j : batch) j->Finish(InferenceResult{});
      answered.set_value();
      may_end.wait();
      return;
    }
    for (auto& j : batch) j->Finish(InferenceResult{});
  });
  const FlowKey a{"a", 1}, b{"b", 1};
  auto job = [](const FlowKey& flow, int64_t expected_us, int id) {
    auto j = MakeJob("", 1, 0, id);
    j->flow = flow;
    j->expected_us = expected_us;
    return j;
  };
  const Clock::time_point before = Clock::now();
  ASSERT_TRUE(ex.Submit(job(a, 50'000, 1)).ok());
  started.get_future().wait();
  DeviceLoad load = ex.LoadFor(a);
  const double elapsed_us = static_cast<double>(MicrosBetween(before, Clock::now()));
  EXPECT_EQ(load.threads, 2) << "one worker and the fair-share thread, due";
  ASSERT_EQ(load.busy_us.size(), 1u);
  EXPECT_LE(load.busy_us[0], 50'000);
  EXPECT_GE(load.busy_us[0], 50'000 - elapsed_us) << "what is left of its 50 ms";
  ASSERT_TRUE(load.flow_free_us.has_value()) << "a runs all the batches it may (one)";
  EXPECT_DOUBLE_EQ(*load.flow_free_us, load.busy_us[0]);
  EXPECT_EQ(load.queued_us, 0);
  EXPECT_GT(ExpectedStartUs(load), 0) << "a's next request waits for a's run";
  EXPECT_FALSE(ex.LoadFor(b).flow_free_us.has_value());
  EXPECT_EQ(ExpectedStartUs(ex.LoadFor(b)), 0) << "b's would start at once on the fair-share thread";
  // Another of a's waits (its flow at its limit): queued work for everyone.
  ASSERT_TRUE(ex.Submit(job(a, 20'000, 2)).ok());
  EXPECT_EQ(ex.LoadFor(b).queued_us, 20'000);
  answer.set_value();
  answered.get_future().wait();
  load = ex.LoadFor(b);
  ASSERT_EQ(load.busy_us.size(), 1u);
  EXPECT_EQ(load.busy_us[0], 0) << "a run whose answers went out holds nothing";
  end.set_value();
  ASSERT_TRUE(ex.WaitIdle(Clock::now() + std::chrono::seconds(30)));
  load = ex.LoadFor(a);
  EXPECT_TRUE(load.busy_us.empty());
  EXPECT_EQ(load.queued_us, 0);
  EXPECT_FALSE(load.flow_free_us.has_value());
  ex.Stop();
}

// A request held for its load leaves a reservation (Reserve): a job
// queued after it that would still run when the request is due waits,
// one that fits before runs, and the request, once submitted, goes first;
// LoadFor reports the reservation (when it falls due, how long it runs), not
// as queued work. Timing only bounds from below or by
// seconds of slack.
TEST(DeviceExecutor, AReservationKeepsItsThreadFromLaterWorkThatWouldOverlapIt) {
  Recorder recorder;
  DeviceExecutor::Options options = DeviceExecutor::WithWorkers(1, 100);
  options.fair = false;  // one thread, no fair-share thread beside it
  DeviceExecutor ex({DeviceKind::kCuda, 0}, options, recorder.Runner());
  auto job = [](int id, int64_t expected_us) {
    auto j = MakeJob("", 1, 0, id);
    j->flow = FlowKey{std::string(id, 'm'), 1};
    j->expected_us = expected_us;
    return j;
  };
  auto held = job(1, 10'000);  // arrived before its reservation was made
  const uint64_t reservation = ex.Reserve(/*due_in_us=*/2e6, /*run_us=*/10'000);
  EXPECT_NE(reservation, 0u);
  EXPECT_EQ(ex.reservations(), 1u);
  const DeviceLoad load = ex.LoadFor(FlowKey{"x", 1});
  EXPECT_EQ(load.queued_us, 0) << "the held request's run is not work queued now";
  ASSERT_EQ(load.reserved.size(), 1u);
  EXPECT_GT(load.reserved[0].due_in_us, 1e6) << "due in about 2 s";
  EXPECT_LE(load.reserved[0].due_in_us, 2e6);
  EXPECT_EQ(load.reserved[0].run_us, 10'000);
  ASSERT_TRUE(ex.Submit(job(2, 5'000'000)).ok());  // 5 s from now: past the request's due time
  ASSERT_TRUE(ex.Submit(job(3, 1'000)).ok());      // done long before it
  EXPECT_EQ(recorder.OnceOneRan(), (std::vector<std::vector<int>>{{103}})) << "the short job ran, the long one waits";
  held->reservation = reservation;
  ASSERT_TRUE(ex.Submit(held).ok());
  EXPECT_EQ(held->reservation, 0u);
  EXPECT_EQ(ex.reservations(), 0u) << "dropped as its request was queued";
  ASSERT_TRUE(ex.WaitIdle(Clock::now() + std::chrono::seconds(30)));
  std::lock_guard<std::mutex> lock(recorder.mu);
  EXPECT_EQ(recorder.batches, (std::vector<std::vector<int>>{{103}, {101}, {102}}))
      << "the held request, queued first, ran before the job that waited for it";
  ex.Stop();
}

// A companion collected for a batch that the start rule let start is held
// to the rule too when it would lengthen the batch: a 1 ms job may start
// before a reservation due in 2 s, but not with a 5 s companion of its
// model, which waits (queued again, first in its model's queue) until the
// held request has run. Without the check the two ran as one batch of 5 s.
TEST(DeviceExecutor, ACompanionThatWouldOverlapAReservationWaitsForIt) {
  Recorder recorder;
  Gate gate;
  DeviceExecutor::Options options = DeviceExecutor::WithWorkers(1, 100);
  options.fair = false;  // one thread, no fair-share thread beside it
  DeviceExecutor ex({DeviceKind::kCuda, 0}, options, recorder.Runner());
  ASSERT_NO_FATAL_FAILURE(gate.HoldAWorkerOf(ex));
  auto job = [](const std::string& key, int64_t rows, int id, int64_t expected_us) {
    auto j = MakeJob(key, rows, /*max_rows=*/8, id);
    j->flow = FlowKey{key, 1};
    j->expected_us = expected_us;
    return j;
  };
  auto held = job("h", 1, 1, 10'000);  // arrived before its reservation was made
  const uint64_t reservation = ex.Reserve(/*due_in_us=*/2e6, /*run_us=*/10'000);
  ASSERT_TRUE(ex.Submit(job("a", 1, 2, 1'000)).ok());
  ASSERT_TRUE(ex.Submit(job("a", 3, 3, 5'000'000)).ok());
  gate.release.set_value();
  EXPECT_EQ(recorder.OnceOneRan(), (std::vector<std::vector<int>>{{102}})) << "the 1 ms job ran without its companion";
  held->reservation = reservation;
  ASSERT_TRUE(ex.Submit(held).ok());
  ASSERT_TRUE(ex.WaitIdle(Clock::now() + std::chrono::seconds(30)));
  std::lock_guard<std::mutex> lock(recorder.mu);
  EXPECT_EQ(recorder.batches, (std::vector<std::vector<int>>{{102}, {101}, {303}}))
      << "the held request ran before the companion that waited for it";
  ex.Stop();
}

// With fair sharing the fair-share thread, due but not started, counts as
// a thread (as LoadFor counts it): a later job takes the one worker, and
// the held request, submitted while it runs, starts the fair-share thread.
TEST(DeviceExecutor, AReservationCountsTheFairShareThreadDue) {
  std::promise<void> long_started;
  std::promise<void> finish_long;
  std::shared_future<void> may_finish = finish_long.get_future().share();
  std::promise<void> held_ran;
  DeviceExecutor ex({DeviceKind::kCuda, 0}, DeviceExecutor::WithWorkers(1, 100), [&](Batch& batch) {
    if (batch[0]->expected_us == 5'000'000) {
      long_started.set_value();
      may_finish.wait();
    } else {
      held_ran.set_value();
    }
    for (auto& j : batch) j->Finish(InferenceResult{});
  });
  auto job = [](int id, int64_t expected_us) {
    auto j = MakeJob("", 1, 0, id);
    j->flow = FlowKey{std::string(id, 'm'), 1};
    j->expected_us = expected_us;
    return j;
  };
  auto held = job(1, 10'000);
  held->reservation = ex.Reserve(/*due_in_us=*/20e6, /*run_us=*/10'000);  // 20 s: binding, it would hold the job 30 s
  ASSERT_TRUE(ex.Submit(job(2, 5'000'000)).ok());
  EXPECT_EQ(long_started.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the later job did not start on the worker beside the fair-share thread due";
  EXPECT_TRUE(ex.Submit(held).ok());
  EXPECT_EQ(held_ran.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the held request did not run beside the long job";
  finish_long.set_value();
  ASSERT_TRUE(ex.WaitIdle(Clock::now() + std::chrono::seconds(30)));
  EXPECT_EQ(ex.threads(), 2);
  ex.Stop();
}

// A reservation whose request never comes (its load ran long) binds no
// longer than its grace after it fell due: the job it held back runs.
TEST(DeviceExecutor, AReservationOverdueByItsGraceIsDropped) {
  Recorder recorder;
  DeviceExecutor::Options options = DeviceExecutor::WithWorkers(1, 100);
  options.fair = false;
  std::atomic<int64_t> started_us{-1};
  const Clock::time_point reserved = Clock::now();
  DeviceExecutor ex({DeviceKind::kCuda, 0}, options, [&](Batch& batch) {
    started_us = static_cast<int64_t>(MicrosBetween(reserved, Clock::now()));
    for (auto& j : batch) j->Finish(InferenceResult{});
  });
  ex.Reserve(/*due_in_us=*/40'000, /*run_us=*/10'000);  // grace 20 ms: dropped 60 ms on
  auto later = MakeJob("", 1, 0, 2);
  later->expected_us = 1'000'000;
  ASSERT_TRUE(ex.Submit(later).ok());
  ASSERT_TRUE(ex.WaitIdle(Clock::now() + std::chrono::seconds(30)));
  EXPECT_GE(started_us.load(), 60'000) << "held back until the reservation's grace ran out";
  EXPECT_EQ(ex.reservations(), 0u);
  ex.Stop();
}

TEST(DeviceExecutor, WaitIdleWaitsForQueuedWorkAndStopRefusesMore) {
  std::atomic<int> ran{0};
  DeviceExecutor ex({DeviceKind::kCpu, 0}, 1, 100, [](Batch&) {});
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(ex.SubmitTask([&] {
                    std::this_thread::sleep_for(std::chrono::milliseconds(5));
                    ran++;
                  }).ok());
  }
  EXPECT_TRUE(ex.WaitIdle(Clock::now() + std::chrono::seconds(30)));
  EXPECT_EQ(ran.load(), 20);
  ex.Stop();
  EXPECT_EQ(ex.SubmitTask([] {}).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace infergate

namespace infergate {
namespace {

// Two models flood one worker; one costs four times the other per run. The
// device's time is split evenly, so the cheap one runs about four times as
// often (FIFO would run them equally often, giving the costly one 80%).
// Fair sharing keeps one thread for other models while one model holds every
// worker. It starts only when such work first waits: a server of one model
// never has it, so its workers do not take turns with an extra thread.
TEST(DeviceExecutor, FairShareThreadStartsWhenAnotherModelWaitsBehindBusyWorkers) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> a_running{0};
  std::promise<void> b_ran;
  DeviceExecutor::Options options;
  options.workers = 1;
  options.capacity = 100;
  options.fair = true;
  DeviceExecutor ex({DeviceKind::kCpu, 0}, options, [&](Batch& batch) {
    if (batch[0]->flow == FlowKey{"A", 1}) {
      a_running++;
      released.wait();
    } else {
      b_ran.set_value();
    }
    for (auto& j : batch) j->Finish(InferenceResult{});
  });
  auto job = [](const char* model, int id) {
    auto j = MakeJob("", 1, 0, id);
    j->flow = {model, 1};
    return j;
  };
  ASSERT_TRUE(ex.Submit(job("A", 1)).ok());
  while (a_running.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(ex.Submit(job("A", 2)).ok());
  ASSERT_TRUE(ex.Submit(job("A", 3)).ok());
  EXPECT_EQ(ex.threads(), 1) << "A waits for its own worker: no thread for other models yet";
  const DeviceExecutor::QueueDepths waiting = ex.QueueDepthsNow();
  EXPECT_EQ(waiting.total, 2u);
  EXPECT_EQ(waiting.by_model, (std::map<FlowKey, size_t>{{FlowKey{"A", 1}, 2}}));
  ASSERT_TRUE(ex.Submit(job("B", 4)).ok());
  EXPECT_EQ(ex.threads(), 2);
  EXPECT_EQ(b_ran.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "B waited behind A's held worker";
  EXPECT_EQ(a_running.load(), 1);
  release.set_value();
  ex.Stop();
  EXPECT_EQ(ex.threads(), 2);
}

// A model's accelerator_instances on an accelerator: a device with fewer
// workers grows to them, the model's batches overlap up to that many, and a
// model that asks for one instance runs one batch at a time beside them.
TEST(DeviceExecutor, AModelsInstancesOnAnAcceleratorOverlapUpToItsCount) {
  std::mutex mu;
  std::condition_variable changed;
  std::map<std::string, int> running, most;
  DeviceExecutor::Options options;
  options.workers = 1;
  options.capacity = 100;
  DeviceExecutor ex({DeviceKind::kCuda, 0}, options, [&](Batch& batch) {
    const std::string model = batch[0]->flow.model;
    std::unique_lock<std::mutex> lock(mu);
    most[model] = std::max(most[model], ++running[model]);
    changed.notify_all();
    // Until two of its batches have run at once, "two" holds each batch
    // until a second one runs beside it (or 10 s pass: the count below
    // then shows they never overlapped).
    if (model == "two") changed.wait_for(lock, std::chrono::seconds(10), [&] { return most["two"] >= 2; });
    if (model == "one") changed.wait_for(lock, std::chrono::milliseconds(20), [] { return false; });
    --running[model];
    changed.notify_all();
    lock.unlock();
    for (auto& j : batch) j->Finish(InferenceResult{});
  });
  auto job = [](const char* model, uint32_t instances, int id) {
    auto j = MakeJob("", 1, 0, id);
    j->flow = {model, 1};
    SchedulingPolicy policy = j->policy();
    policy.accelerator_instances = instances;
    testing::RouteWithPolicy(*j, std::move(policy));
    return j;
  };
  EXPECT_EQ(ex.workers(), 1);
  for (int id = 1; id <= 4; ++id) ASSERT_TRUE(ex.Submit(job("two", 2, id)).ok());
  EXPECT_EQ(ex.workers(), 2) << "the device grew to the model's instances";
  for (int id = 5; id <= 8; ++id) ASSERT_TRUE(ex.Submit(job("one", 1, id)).ok());
  EXPECT_TRUE(ex.WaitIdle(Clock::now() + std::chrono::seconds(60)));
  ex.Stop();
  EXPECT_EQ(most["two"], 2) << "the model's two instances never ran at once";
  EXPECT_EQ(most["one"], 1) << "a one-instance model ran two batches at once";
}

TEST(DeviceExecutor, TwoFloodedModelsOfDifferentCostShareTheDeviceTime) {
  std::mutex mu;
  std::map<std::string, double> busy_ms;
  std::atomic<bool> stop{false};
  DeviceExecutor ex({DeviceKind::kCpu, 0}, 1, 10000, [&](Batch& batch) {
    const std::string flow = batch[0]->flow.ToString();
    double ms = flow == "costly:1" ? 4 : 1;
    if (!stop.load()) {
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int>(ms * 1000)));
      std::lock_guard<std::mutex> lock(mu);
      busy_ms[flow] += ms;
    }
    for (auto& j : batch) j->Finish(InferenceResult{});
  });
  for (int i = 0; i < 400; ++i) {
    for (const char* model : {"cheap", "costly"}) {
      auto job = MakeJob("", 1, 0, 1);
      job->flow = {model, 1};
      ASSERT_TRUE(ex.Submit(job).ok());
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  stop = true;
  ex.Stop();
  std::lock_guard<std::mutex> lock(mu);
  double share = busy_ms["cheap:1"] / (busy_ms["cheap:1"] + busy_ms["costly:1"]);
  EXPECT_NEAR(share, 0.5, 0.12) << "cheap " << busy_ms["cheap:1"] << " ms, costly " << busy_ms["costly:1"] << " ms";
}

}  // namespace
}  // namespace infergate
