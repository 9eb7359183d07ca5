// A compiled package (.pt2) loaded by AotiModel, run the way workers run it.
// The package is made at test time with Debian's python3-torch
// (tools/make_pt2_models.py --mlp), as a PyTorch 2.x user makes one.

#include "model_store/aoti_model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "model_store/model_repository.h"
#include "tests/common/scratch_dir.h"

namespace infergate {
namespace {

class AotiModelTest : public ::testing::Test {
 protected:
  // One package for the whole binary: a compile takes seconds.
  static void SetUpTestSuite() {
    const std::string root = testing::ProcessScratchDir().path();
    const std::string log = root + "/make_pt2_models.log";
    const std::string command =
        std::string(DEBIAN_PYTHON3) + " " + MAKE_PT2_MODELS + " --mlp " + root + " >" + log + " 2>&1";
    if (std::system(command.c_str()) != 0) {
      std::stringstream text;
      text << std::ifstream(log).rdbuf();
      make_error_ = new std::string(command + " failed:\n" + text.str());
      return;
    }
    folder_ = new std::string(root + "/mlp_pt2");
  }

  void SetUp() override { ASSERT_EQ(make_error_, nullptr) << *make_error_; }

  std::shared_ptr<AotiModel> Load() const {
    absl::StatusOr<v1::ModelConfig> config = ReadModelConfig(*folder_, "mlp_pt2");
    EXPECT_TRUE(config.ok()) << config.status();
    if (!config.ok()) return nullptr;
    DeviceInfo cpu;
    absl::StatusOr<std::shared_ptr<AotiModel>> model =
        AotiModel::Load(*folder_ + "/1/model.pt2", *config, cpu, DType::kFloat32);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *model : nullptr;
  }

  static inline std::string* folder_ = nullptr;
  static inline std::string* make_error_ = nullptr;
};

// LibTorch 2.6's container deadlocked when two threads made its first run
// together (aoti_model.h): every worker that ran the model then waited
// forever. Many fresh loads, each first run by threads started together;
// each answer is checked against the same input run alone after.
TEST_F(AotiModelTest, FirstRunsMadeTogetherAllReturnTheRightAnswer) {
  // Without the fix, the runs deadlocked by the 9th load in each of three
  // tries (2, 3 and 8 threads).
  constexpr int kThreads = 3;
  constexpr int kLoads = 40;
  for (int load = 0; load < kLoads; ++load) {
    std::shared_ptr<AotiModel> model = Load();
    ASSERT_NE(model, nullptr);
    std::vector<at::Tensor> inputs;
    for (int t = 0; t < kThreads; ++t) inputs.push_back(torch::randn({1 + t % 3, 16}));
    std::vector<absl::StatusOr<std::vector<NamedTensor>>> answers(kThreads, absl::UnknownError("did not run"));
    std::atomic<int> ready{0};
    std::mutex mu;
    std::condition_variable cv;
    int done = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        // A spinning start: a condition variable's wake-ups come one at a
        // time, too far apart for the runs to meet.
        ++ready;
        while (ready.load() < kThreads) {
        }
        answers[t] = model->Run({inputs[t]});
        std::lock_guard lock(mu);
        ++done;
        cv.notify_all();
      });
    }
    {
      // A deadlock never ends; a first run takes milliseconds, also under
      // sanitizers on a busy machine, so two minutes is a wide margin.
      std::unique_lock lock(mu);
      if (!cv.wait_for(lock, std::chrono::minutes(2), [&] { return done == kThreads; })) {
        // Blocked threads cannot be joined or stopped: report and leave.
        std::cerr << "load " << load << ": only " << done << " of " << kThreads
                  << " first runs returned in 2 minutes (the model's runs are deadlocked)" << std::endl;
        std::fflush(nullptr);
        std::_Exit(1);
      }
    }
    for (std::thread& t : threads) t.join();
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_TRUE(answers[t].ok()) << "load " << load << " thread " << t << ": " << answers[t].status();
      absl::StatusOr<std::vector<NamedTensor>> alone = model->Run({inputs[t]});
      ASSERT_TRUE(alone.ok()) << alone.status();
      ASSERT_EQ((*answers[t]).size(), 1u);
      EXPECT_TRUE(torch::allclose((*answers[t])[0].tensor, (*alone)[0].tensor))
          << "load " << load << " thread " << t << " answered differently from the same input run alone";
    }
  }
}

}  // namespace
}  // namespace infergate
