// The core facade in-process, with fake servables and fake devices: the
// races and policies that integration tests can only hit by chance.

#include <ATen/ops/arange.h>
#include <gtest/gtest.h>
#include <time.h>

#include <future>
#include <random>
#include <thread>

#include "scheduler/core/inference_core.h"
#include "tests/scheduler/fake_servable.h"

namespace infergate {
namespace {

using testing::Answer;
using testing::FakeDevices;
using testing::FakeLoader;
using testing::FakeScript;
using testing::Gate;
using testing::OutOfMemory;
using testing::TempRepository;
using testing::UnsupportedOp;

const DeviceId kCuda{DeviceKind::kCuda, 0};

InferenceRequest Request(const std::string& device, float first = 0) {
  InferenceRequest r;
  r.model = "double";
  r.device = device;
  r.inputs.push_back({"x", at::arange(first, first + 4).reshape({1, 4})});
  return r;
}

void ExpectDoubled(const absl::StatusOr<InferenceResult>& result, float first) {
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outputs.size(), 1u);
  EXPECT_TRUE(result->outputs[0].tensor.equal(at::arange(first, first + 4).reshape({1, 4}).mul(2)));
}

class CoreTest : public ::testing::Test {
 protected:
  void Start(SchedulerOptions options = {}) {
    // These count the runs of fake models: no accuracy checks adding runs
    // (the contract is tested through the real server).
    options.precision_checks = false;
    options.cpu_workers = options.cpu_workers ? options.cpu_workers : 1;
    options.intra_op_threads = 1;
    core_ = std::make_unique<InferenceCore>(repo_.root(), DeviceRegistry(FakeDevices(true, true)), options,
                                            FakeLoader(script_));
    ASSERT_TRUE(core_->Start().ok());
  }

  TempRepository repo_{{{"double", "max_batch_size: 8 inputs { name: \"x\" dtype: FLOAT32 dims: [4] }"}}};
  std::shared_ptr<FakeScript> script_ = std::make_shared<FakeScript>();
  std::unique_ptr<InferenceCore> core_;
};

TEST_F(CoreTest, AnswersFromTheServableWhereAsked) {
  Start();
  for (const char* device : {"cpu", "cuda:0", "mps", "auto"}) {
    Answer answer;
    core_->Infer(Request(device, 3), answer.callback());
    ASSERT_TRUE(answer.ready_within(std::chrono::seconds(10)));
    ExpectDoubled(answer.future.get(), 3);
    EXPECT_FALSE(answer.future.get()->placement.fell_back) << device;
  }
  Answer unknown;
  core_->Infer(
      [] {
        InferenceRequest r = Request("cpu");
        r.model = "nosuch";
        return r;
      }(),
      unknown.callback());
  EXPECT_EQ(unknown.future.get().status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CoreTest, UnsupportedOpFallsBackOnceThenRoutesStraightToTheCpu) {
  script_->on_run = [](const DeviceId& d) {
    return d.kind == DeviceKind::kMps ? UnsupportedOp("aten::fft_r2c") : absl::OkStatus();
  };
  Start();
  for (int i = 0; i < 3; ++i) {
    Answer answer;
    core_->Infer(Request("mps", static_cast<float>(i)), answer.callback());
    const absl::StatusOr<InferenceResult>& result = answer.future.get();
    ExpectDoubled(result, static_cast<float>(i));
    EXPECT_EQ(result->placement.device, "cpu");
    EXPECT_EQ(result->placement.fallback_reason, "unsupported_op:aten::fft_r2c");
  }
  EXPECT_EQ(script_->runs_elsewhere.load(), 1);  // only the first tried MPS
  std::vector<DeviceStatus> devices = core_->Devices();
  auto mps = std::find_if(devices.begin(), devices.end(),
                          [](const DeviceStatus& d) { return d.info.id.kind == DeviceKind::kMps; });
  ASSERT_NE(mps, devices.end());
  EXPECT_EQ(mps->unsupported_ops, std::vector<std::string>{"double:aten::fft_r2c"});
}

TEST_F(CoreTest, OutOfMemoryRetriesOnceThenFallsBackUnlessDenied) {
  script_->on_run = [](const DeviceId& d) { return d.kind == DeviceKind::kCuda ? OutOfMemory(d) : absl::OkStatus(); };
  Start();
  Answer allowed;
  core_->Infer(Request("cuda:0", 1), allowed.callback());
  ExpectDoubled(allowed.future.get(), 1);
  EXPECT_EQ(allowed.future.get()->placement.fallback_reason, "oom");
  EXPECT_EQ(script_->runs_elsewhere.load(), 2);  // the run and one retry after evicting
  Answer denied;
  InferenceRequest deny = Request("cuda:0", 1);
  deny.allow_fallback = false;
  core_->Infer(std::move(deny), denied.callback());
  EXPECT_EQ(denied.future.get().status().code(), absl::StatusCode::kResourceExhausted);
}

// A client cancels while its request moves from a failed device to the
// CPU. The move and the cancel race on which executor holds the job; the
// cancel must win promptly (the CPU is busy with other work), and the
// request is answered exactly once. Before the executor pointer was an
// atomic checked on both sides, the cancel was lost until the CPU got to
// the job, and ThreadSanitizer reported the race.
TEST_F(CoreTest, CancelWhileFallingBackIsAnsweredAtOnce) {
  Gate cuda_gate, cpu_gate;
  script_->on_run = [&](const DeviceId& d) {
    if (d.kind == DeviceKind::kCuda) {
      cuda_gate.Wait();
      return OutOfMemory(d);
    }
    cpu_gate.Wait();
    return absl::OkStatus();
  };
  Start();
  Answer blocker, moving;
  core_->Infer(Request("cpu", 0), blocker.callback());  // holds the only CPU worker
  ASSERT_TRUE(cpu_gate.AwaitWaiters(1));
  std::shared_ptr<RequestHandle> handle = core_->Infer(Request("cuda:0", 5), moving.callback());
  ASSERT_TRUE(cuda_gate.AwaitWaiters(1));
  handle->Cancel();  // running on cuda: in no queue
  cuda_gate.Open();  // fails, is retried, fails, moves to the CPU's queue
  ASSERT_TRUE(moving.ready_within(std::chrono::seconds(10))) << "the cancel was lost in the move";
  EXPECT_EQ(moving.future.get().status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(blocker.ready_within(std::chrono::milliseconds(0)));
  cpu_gate.Open();
  ExpectDoubled(blocker.future.get(), 0);
  EXPECT_EQ(moving.calls.load(), 1);
}

// Many clients cancel at random moments while their requests fail over to
// the CPU. Run under ThreadSanitizer by tests/run.sh.
TEST_F(CoreTest, CancelsRacingFallbacksAnswerEveryRequestExactlyOnce) {
  script_->on_run = [](const DeviceId& d) {
    if (d.kind == DeviceKind::kCuda) return OutOfMemory(d);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    return absl::OkStatus();
  };
  Start();
  constexpr int kRequests = 400;
  std::vector<std::unique_ptr<Answer>> answers;
  std::vector<std::shared_ptr<RequestHandle>> handles;
  std::mt19937 rng(11);
  for (int i = 0; i < kRequests; ++i) {
    answers.push_back(std::make_unique<Answer>());
    handles.push_back(core_->Infer(Request("cuda:0", static_cast<float>(i % 7)), answers.back()->callback()));
    if (i % 3 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
      handles[rng() % handles.size()]->Cancel();
    }
  }
  int ok = 0, cancelled = 0;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(answers[i]->ready_within(std::chrono::seconds(30))) << "request " << i << " was never answered";
    const absl::StatusOr<InferenceResult>& result = answers[i]->future.get();
    if (result.ok()) {
      ExpectDoubled(result, static_cast<float>(i % 7));
      ++ok;
    } else {
      EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled) << result.status();
      ++cancelled;
    }
  }
  core_->Shutdown();
  for (const auto& a : answers) EXPECT_EQ(a->calls.load(), 1);
  std::cout << ok << " answered, " << cancelled << " cancelled\n";
}

// SIGTERM arrives while an accepted request runs on an accelerator that
// then fails: the request still moves to the CPU and is answered there.
// Drain used to stop the CPU's queue with the others, so it got UNAVAILABLE.
TEST_F(CoreTest, DrainLetsAcceptedWorkFallBackToTheCpu) {
  Gate cuda_gate;
  script_->on_run = [&](const DeviceId& d) {
    if (d.kind != DeviceKind::kCuda) return absl::OkStatus();
    cuda_gate.Wait();
    return OutOfMemory(d);
  };
  Start();
  Answer accepted;
  core_->Infer(Request("cuda:0", 2), accepted.callback());
  ASSERT_TRUE(cuda_gate.AwaitWaiters(1));
  std::future<bool> drained = std::async(
      std::launch::async, [&] { return core_->Drain(std::chrono::steady_clock::now() + std::chrono::seconds(20)); });
  // New work is refused from the moment draining begins.
  Answer late;
  for (int i = 0; i < 200 && !late.ready_within(std::chrono::milliseconds(0)); ++i) {
    Answer probe;
    core_->Infer(Request("cpu", 0), probe.callback());
    if (probe.future.get().status().code() == absl::StatusCode::kUnavailable) {
      late.promise.set_value(probe.future.get());
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(late.ready_within(std::chrono::seconds(0))) << "new requests were still accepted while draining";
  cuda_gate.Open();
  const absl::StatusOr<InferenceResult>& result = accepted.future.get();
  ExpectDoubled(result, 2);
  EXPECT_EQ(result->placement.device, "cpu");
  EXPECT_EQ(result->placement.fallback_reason, "oom");
  EXPECT_TRUE(drained.get());
  EXPECT_FALSE(core_->ready());
}

TEST_F(CoreTest, DevicesAndModelsAreOneSnapshotEach) {
  Start();
  Answer answer;
  core_->Infer(Request("cpu", 1), answer.callback());
  ExpectDoubled(answer.future.get(), 1);
  std::vector<DeviceStatus> devices = core_->Devices();
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_EQ(devices[0].info.id, kCuda);  // cold-start preference order
  const DeviceStatus& cpu = devices[2];
  EXPECT_EQ(cpu.info.id.kind, DeviceKind::kCpu);
  EXPECT_EQ(cpu.workers, 1);
  ASSERT_EQ(cpu.resident.size(), 1u);
  EXPECT_EQ(cpu.resident[0].key.model, "double");
  EXPECT_GT(cpu.cache_budget_bytes, 0u);
  absl::StatusOr<std::vector<ModelStatus>> models = core_->Models();
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->size(), 1u);
  EXPECT_EQ((*models)[0].versions, std::vector<int64_t>{1});
  ASSERT_EQ((*models)[0].loaded.size(), 1u);
  EXPECT_TRUE(core_->KnownModel("double"));
  EXPECT_FALSE(core_->KnownModel("nosuch"));
  absl::StatusOr<size_t> unloaded = core_->UnloadModel({"double", "", "", Precision::kAuto, nullptr, nullptr, ""});
  EXPECT_EQ(*unloaded, 1u);
}

// --simulate-cpu-slowdown: a CPU run is held as long as a CPU that many
// times slower would take: its own work (the worker thread's CPU time, with
// one intra-op thread) is multiplied, and the time the core was taken away
// from it (stood for here by a sleep, which takes no CPU) is not: loads and
// the simulated accelerators' runs that share the real cores must not slow
// the simulated CPU down four times over.
TEST_F(CoreTest, SimulatedCpuSlowdownMultipliesTheRunsOwnWorkNotTheTimeItWaited) {
  constexpr auto kPart = std::chrono::milliseconds(40);
  std::atomic<bool> spin{true};
  script_->on_run = [&](const DeviceId&) {
    if (spin.load()) {  // 40 ms of the thread's own CPU time
      auto thread_cpu = [] {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
      };
      const auto until = thread_cpu() + kPart;
      while (thread_cpu() < until) {
      }
    } else {
      std::this_thread::sleep_for(kPart);
    }
    return absl::OkStatus();
  };
  SchedulerOptions options;
  options.simulated_cpu_slowdown = 4;
  Start(options);
  auto compute_ms = [&] {
    Answer answer;
    core_->Infer(Request("cpu"), answer.callback());
    EXPECT_TRUE(answer.ready_within(std::chrono::seconds(30)));
    const auto result = answer.future.get();
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? static_cast<double>(result->timing.compute_us) / 1000 : 0.0;
  };
  compute_ms();  // a model's first run may load what later runs reuse
  EXPECT_GE(compute_ms(), 4 * 40.0) << "40 ms of the run's own work, 4x slower";
  spin = false;
  const double waited = compute_ms();
  EXPECT_GE(waited, 40.0);
  EXPECT_LT(waited, 4 * 40.0) << "the 40 ms the run waited (no CPU of its own) was multiplied";
}

// model_warmup's count: each sample runs `count` times before the model
// serves (0 means once), and a config without samples runs once on zeros;
// then, its latency on the device not known yet, the last input runs once
// more, timed (ModelManager::WarmUp).
TEST(CoreWarmup, EachSampleRunsCountTimesBeforeTheModelServes) {
  const std::string input = R"(max_batch_size: 8 inputs { name: "x" dtype: FLOAT32 dims: [4] } warmup: true )";
  const std::string sample = R"( inputs { name: "x" dtype: FLOAT32 dims: [4] source: RANDOM_DATA } })";
  TempRepository repo({{"three", input + R"(warmup_samples { name: "a" batch_size: 2 count: 3)" + sample},
                       {"twice_once", input + R"(warmup_samples { name: "a" batch_size: 1 count: 2)" + sample +
                                          R"( warmup_samples { name: "b" batch_size: 1)" + sample},
                       {"zeros", input}});
  // One model served at a time (explicit model control), so each count is its own.
  for (const auto& [model, runs] :
       std::vector<std::pair<std::string, int>>{{"three", 3 + 1}, {"twice_once", 3 + 1}, {"zeros", 1 + 1}}) {
    SchedulerOptions options;
    options.precision_checks = false;
    options.cpu_workers = 1;
    options.intra_op_threads = 1;
    options.initial_models = {model};
    options.model_control = SchedulerOptions::ModelControl::kExplicit;
    auto script = std::make_shared<FakeScript>();
    InferenceCore core(repo.root(), DeviceRegistry(FakeDevices(false, false)), options, FakeLoader(script));
    ASSERT_TRUE(core.Start().ok()) << model;
    EXPECT_EQ(script->runs_on_cpu.load(), runs) << model;
    EXPECT_EQ(script->runs_elsewhere.load(), 0) << model;
  }
}

}  // namespace
}  // namespace infergate
