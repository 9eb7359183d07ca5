// Queueing policy through the core facade, from config.pbtxt to answers:
// per-model caps, priorities and queue timeouts, with fake servables on one
// CPU worker (plus the fair-share thread) that the test holds.

#include <ATen/ops/ones.h>
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <thread>

#include "scheduler/core/inference_core.h"
#include "tests/scheduler/fake_servable.h"

namespace infergate {
namespace {

using std::chrono::milliseconds;
using testing::Answer;
using testing::FakeDevices;
using testing::FakeLoader;
using testing::FakeScript;
using testing::Gate;
using testing::TempRepository;

constexpr char kSignature[] = "inputs { name: \"x\" dtype: FLOAT32 dims: [1, 4] }\n";

InferenceRequest QueuedRequest(const std::string& model, uint32_t priority = 0, uint64_t timeout_us = 0) {
  InferenceRequest r;
  r.model = model;
  r.device = "cpu";
  r.priority = priority;
  r.timeout_us = timeout_us;
  r.inputs.push_back({"x", at::ones({1, 4})});
  return r;
}

class CoreQueueingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The first run of every test waits at the gate, holding the only worker.
    script_->on_run = [this](const DeviceId&) {
      if (!released_.load()) gate_.Wait();
      return absl::OkStatus();
    };
  }
  void Start(SchedulerOptions options = {}) {
    options.cpu_workers = 1;
    options.intra_op_threads = 1;
    core_ = std::make_unique<InferenceCore>(repo_.root(), DeviceRegistry(FakeDevices(false, false)), options,
                                            FakeLoader(script_));
    ASSERT_TRUE(core_->Start().ok());
  }
  // Occupies the worker and the fair-share thread until Release: "free"
  // holds the one worker a model may use, "other" the thread left for other
  // models. Requests sent after this wait in the queue.
  void HoldTheWorker() {
    core_->Infer(QueuedRequest("free"), holder_.callback());
    core_->Infer(QueuedRequest("other"), other_holder_.callback());
    ASSERT_TRUE(gate_.AwaitWaiters(2));
  }
  void Release() {
    released_ = true;
    gate_.Open();
    ASSERT_TRUE(holder_.ready_within(std::chrono::seconds(10)));
    ASSERT_TRUE(other_holder_.ready_within(std::chrono::seconds(10)));
  }
  size_t QueuedFor(const std::string& model) {
    for (const DeviceStatus& d : core_->Devices()) {
      for (const ModelQueueDepth& q : d.model_queues) {
        if (q.model == model) return q.depth;
      }
    }
    return 0;
  }

  TempRepository repo_{{
      {"free", kSignature},
      {"other", kSignature},
      {"capped", std::string(kSignature) + "default_queue_policy { max_queue_size: 2 }"},
      {"ranked", std::string(kSignature) + "priority_levels: 3 default_priority_level: 2"},
      {"timed", std::string(kSignature) + "default_queue_policy { default_timeout_microseconds: 50000 }"},
      {"lenient", std::string(kSignature) +
                      "default_queue_policy { default_timeout_microseconds: 50000 allow_timeout_override: true }"},
      {"delayed",
       std::string(kSignature) + "default_queue_policy { default_timeout_microseconds: 1000 timeout_action: DELAY }"},
  }};
  std::shared_ptr<FakeScript> script_ = std::make_shared<FakeScript>();
  std::unique_ptr<InferenceCore> core_;
  Gate gate_;
  std::atomic<bool> released_{false};
  Answer holder_, other_holder_;
};

TEST_F(CoreQueueingTest, AFloodedModelIsRefusedAtItsOwnCapWhileAnotherIsNot) {
  Start();
  HoldTheWorker();
  std::vector<std::unique_ptr<Answer>> capped, free;
  for (int i = 0; i < 5; ++i) {
    capped.push_back(std::make_unique<Answer>());
    core_->Infer(QueuedRequest("capped"), capped.back()->callback());
  }
  for (int i = 0; i < 20; ++i) {
    free.push_back(std::make_unique<Answer>());
    core_->Infer(QueuedRequest("free"), free.back()->callback());
  }
  EXPECT_EQ(QueuedFor("capped"), 2u);
  EXPECT_EQ(QueuedFor("free"), 20u);
  for (int i = 2; i < 5; ++i) {
    ASSERT_TRUE(capped[i]->ready_within(milliseconds(0))) << "request " << i << " over the cap was queued";
    absl::Status refused = capped[i]->future.get().status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(refused.message().find("max_queue_size"), std::string::npos) << refused;
    EXPECT_NE(refused.message().find("capped"), std::string::npos) << refused;
  }
  Release();
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(capped[i]->future.get().ok()) << capped[i]->future.get().status();
  for (auto& a : free) EXPECT_TRUE(a->future.get().ok()) << a->future.get().status();
}

TEST_F(CoreQueueingTest, HigherPriorityRunsFirstUnderLoad) {
  std::mutex mu;
  std::vector<uint32_t> order;
  Start();
  HoldTheWorker();
  std::vector<std::unique_ptr<Answer>> answers;
  const std::vector<uint32_t> sent = {3, 0, 1, 3, 2, 1};  // 0 takes the default, 2
  for (uint32_t p : sent) {
    answers.push_back(std::make_unique<Answer>());
    Answer* answer = answers.back().get();
    core_->Infer(QueuedRequest("ranked", p), [&, p, answer](absl::StatusOr<InferenceResult> r, const RequestLabels& l) {
      {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(p == 0 ? 2 : p);
      }
      answer->callback()(std::move(r), l);
    });
  }
  Release();
  for (auto& a : answers) ASSERT_TRUE(a->future.get().ok());
  // Batching is off for this model (max_batch_size 0), so the order of
  // answers is the order of runs.
  EXPECT_EQ(order, (std::vector<uint32_t>{1, 1, 2, 2, 3, 3}));
}

TEST_F(CoreQueueingTest, APriorityOutsideTheModelsLevelsIsNamed) {
  released_ = true;  // no run waits here
  Start();
  Answer answer;
  core_->Infer(QueuedRequest("ranked", 4), answer.callback());
  absl::Status s = answer.future.get().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("priority: 4"), std::string::npos) << s;
  // Models without priority levels take any priority as equal.
  Answer plain;
  core_->Infer(QueuedRequest("free", 9), plain.callback());
  EXPECT_TRUE(plain.future.get().ok());
}

TEST_F(CoreQueueingTest, QueueTimeoutsRefuseWithUnavailableAndRequestsMayShortenThem) {
  Start();
  HoldTheWorker();
  Answer by_default, shortened, longer, lengthened;
  Clock::time_point sent = Clock::now();
  core_->Infer(QueuedRequest("timed"), by_default.callback());
  core_->Infer(QueuedRequest("timed", 0, 10000), shortened.callback());        // 10 ms < 50 ms
  core_->Infer(QueuedRequest("timed", 0, 10000000), longer.callback());        // 10 s, not allowed to lengthen
  core_->Infer(QueuedRequest("lenient", 0, 10000000), lengthened.callback());  // 10 s, allowed
  // Expired requests are answered while the worker is still held: a later
  // submission sweeps them out.
  std::vector<std::unique_ptr<Answer>> probes;
  for (int i = 0; i < 200 && !by_default.ready_within(milliseconds(0)); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    probes.push_back(std::make_unique<Answer>());
    core_->Infer(QueuedRequest("capped"), probes.back()->callback());
  }
  ASSERT_TRUE(shortened.ready_within(milliseconds(0)));
  ASSERT_TRUE(by_default.ready_within(milliseconds(0)));
  ASSERT_TRUE(longer.ready_within(milliseconds(0)));
  for (Answer* a : {&by_default, &shortened, &longer}) {
    absl::Status s = a->future.get().status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_NE(s.message().find("queue timeout"), std::string::npos) << s;
  }
  EXPECT_GE(Clock::now() - sent, milliseconds(50));
  EXPECT_FALSE(lengthened.ready_within(milliseconds(0)));
  Release();
  EXPECT_TRUE(lengthened.future.get().ok()) << lengthened.future.get().status();
  // Every probe is answered (run, or refused at the cap) before they go.
  for (auto& probe : probes) ASSERT_TRUE(probe->ready_within(std::chrono::seconds(10)));
}

// DELAY keeps a request whose queue timeout passed, but runs it after work
// that is still in time. (One worker and no fair-share thread, so the
// order of answers is the order of runs: with the extra thread, a delayed
// request also runs whenever that thread would otherwise stay idle.)
TEST_F(CoreQueueingTest, ADelayedRequestRunsAfterEverythingElse) {
  std::mutex mu;
  std::vector<std::string> order;
  SchedulerOptions one_thread;
  one_thread.fair_queueing = false;
  Start(one_thread);
  core_->Infer(QueuedRequest("free"), holder_.callback());
  ASSERT_TRUE(gate_.AwaitWaiters(1));
  auto record = [&](const std::string& model, Answer* answer) {
    return [&, model, answer](absl::StatusOr<InferenceResult> r, const RequestLabels& l) {
      {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(model);
      }
      answer->callback()(std::move(r), l);
    };
  };
  Answer delayed, later;
  core_->Infer(QueuedRequest("delayed"), record("delayed", &delayed));
  std::this_thread::sleep_for(milliseconds(5));  // its 1 ms timeout passes
  core_->Infer(QueuedRequest("other"), record("other", &later));
  released_ = true;
  gate_.Open();
  ASSERT_TRUE(delayed.future.get().ok()) << delayed.future.get().status();
  ASSERT_TRUE(later.future.get().ok());
  EXPECT_EQ(order, (std::vector<std::string>{"other", "delayed"}));
  ASSERT_TRUE(holder_.future.get().ok());
}

}  // namespace
}  // namespace infergate
