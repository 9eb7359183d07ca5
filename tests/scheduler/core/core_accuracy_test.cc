// The accuracy contract in the core, with fake servables (exact in any
// dtype): many clients at once while a check runs on the checker's thread,
// so ThreadSanitizer sees the request path and the checker together.

#include <ATen/ops/arange.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "scheduler/core/inference_core.h"
#include "tests/scheduler/fake_servable.h"

namespace infergate {
namespace {

using testing::Answer;
using testing::FakeDevices;
using testing::FakeLoader;
using testing::FakeScript;
using testing::TempRepository;

InferenceRequest OnCuda(float first) {
  InferenceRequest r;
  r.model = "double";
  r.device = "cuda:0";
  r.inputs.push_back({"x", at::arange(first, first + 4).reshape({1, 4})});
  return r;
}

TEST(CoreAccuracy, RequestsNeverWaitForTheCheckAndTheVerifiedDtypeServesAfterIt) {
  TempRepository repo({{"double", "max_batch_size: 8 inputs { name: \"x\" dtype: FLOAT32 dims: [4] }"}});
  auto script = std::make_shared<FakeScript>();
  SchedulerOptions options;
  options.cpu_workers = 2;
  options.intra_op_threads = 1;
  InferenceCore core(repo.root(), DeviceRegistry(FakeDevices(/*cuda=*/true, /*mps=*/false)), options,
                     FakeLoader(script));
  // The check's FP32 reference runs on the CPU: held there until the 200
  // requests are answered (at most 60 s), so each of them must have been
  // answered without waiting for it (FP32, "unverified:bfloat16"). Requests
  // that waited for the check would be answered only after the hold ran
  // out, in the verified dtype, and fail the count below.
  std::mutex hold_mu;
  std::condition_variable released;
  bool held = true;
  script->on_run = [&](const DeviceId& device) {
    if (device.kind == DeviceKind::kCpu) {
      std::unique_lock<std::mutex> lock(hold_mu);
      released.wait_for(lock, std::chrono::seconds(60), [&] { return !held; });
    }
    return absl::OkStatus();
  };
  ASSERT_TRUE(core.Start().ok());

  std::atomic<int> unverified{0}, reduced{0}, wrong{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const float first = static_cast<float>(t * 100 + i);
        Answer answer;
        core.Infer(OnCuda(first), answer.callback());
        if (!answer.ready_within(std::chrono::seconds(90))) {
          wrong++;
          continue;
        }
        absl::StatusOr<InferenceResult> result = answer.future.get();
        if (!result.ok() || !result->outputs[0].tensor.equal(at::arange(first, first + 4).reshape({1, 4}).mul(2))) {
          wrong++;
          continue;
        }
        // (Fake servables report float32 whatever they were loaded in: the
        // reason tells which dtype the route chose.)
        const Placement& p = result->placement;
        if (p.precision_reason == "unverified:bfloat16") {
          unverified++;
        } else if (p.precision_reason.empty()) {
          reduced++;
        } else {
          wrong++;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(unverified.load(), 200) << reduced.load() << " answered in the reduced dtype while its check was held";
  {
    std::lock_guard<std::mutex> lock(hold_mu);
    held = false;
  }
  released.notify_all();

  // Released, the check passes and BF16 (the policy's pick on capability
  // 8.0) serves from then on.
  bool served_reduced = false;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !served_reduced && std::chrono::steady_clock::now() < deadline;) {
    Answer answer;
    core.Infer(OnCuda(1), answer.callback());
    ASSERT_TRUE(answer.ready_within(std::chrono::seconds(30)));
    served_reduced = answer.future.get().ok() && answer.future.get()->placement.precision_reason.empty();
    if (!served_reduced) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(served_reduced);
  absl::StatusOr<ModelStatus> model = core.Model("double");
  ASSERT_TRUE(model.ok());
  ASSERT_EQ(model->precision.size(), 1u);
  EXPECT_EQ(model->precision[0].state, "verified");
  EXPECT_EQ(model->precision[0].device, "cuda:0");
  core.Shutdown();
}

}  // namespace
}  // namespace infergate
