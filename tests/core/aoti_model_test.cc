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
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
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

  std::shared_ptr<AotiModel> Load(int instances = 1) const {
    absl::StatusOr<v1::ModelConfig> config = ReadModelConfig(*folder_, "mlp_pt2");
    EXPECT_TRUE(config.ok()) << config.status();
    if (!config.ok()) return nullptr;
    DeviceInfo cpu;
    absl::StatusOr<std::shared_ptr<AotiModel>> model =
        AotiModel::Load(*folder_ + "/1/model.pt2", *config, cpu, DType::kFloat32, nullptr, instances);
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
  // With one instance the runs take turns on it; with three, each thread's
  // first run is its own container's, all at once.
  constexpr int kThreads = 3;
  constexpr int kLoads = 40;
  for (int load = 0; load < kLoads; ++load) {
    std::shared_ptr<AotiModel> model = Load(load % 4 == 3 ? kThreads : 1);
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

// The folders in /tmp holding an unpacked package.
std::set<std::string> UnpackedFolders() {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/tmp")) {
    std::error_code ec;
    if (e.path().filename().string().size() == 6 && std::filesystem::is_directory(e.path() / "data" / "aotinductor", ec)) {
      out.insert(e.path().string());
    }
  }
  return out;
}

// A package runs one call at a time per loaded instance: with two, two
// workers run at once, each on its own unpacked copy, and every answer is
// the one the same input gets alone.
TEST_F(AotiModelTest, EachInstanceIsALoaderOfItsOwnAndRunsAnswerRight) {
  std::shared_ptr<AotiModel> one = Load(1);
  ASSERT_NE(one, nullptr);
  const std::set<std::string> before = UnpackedFolders();
  std::shared_ptr<AotiModel> model = Load(2);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->instances(), 2u);
  EXPECT_EQ(one->instances(), 1u);
  EXPECT_EQ(model->resident_bytes(), 2 * one->resident_bytes()) << "each instance holds the constants";
  std::set<std::string> added;
  for (const std::string& f : UnpackedFolders()) {
    if (!before.count(f)) added.insert(f);
  }
  EXPECT_EQ(added.size(), 2u) << "one unpacked folder per instance";

  // The warm-up runs every instance and answers as a run does.
  const at::Tensor warm_input = torch::randn({1, 16});
  absl::StatusOr<std::vector<NamedTensor>> warm = model->WarmUp({warm_input});
  absl::StatusOr<std::vector<NamedTensor>> warm_alone = one->Run({warm_input});
  ASSERT_TRUE(warm.ok()) << warm.status();
  ASSERT_TRUE(warm_alone.ok()) << warm_alone.status();
  EXPECT_TRUE(torch::allclose((*warm)[0].tensor, (*warm_alone)[0].tensor));

  constexpr int kThreads = 4;
  constexpr int kRuns = 50;
  std::vector<at::Tensor> inputs;
  for (int t = 0; t < kThreads; ++t) inputs.push_back(torch::randn({1 + t, 16}));
  std::vector<absl::StatusOr<std::vector<NamedTensor>>> alone;
  for (const at::Tensor& x : inputs) alone.push_back(one->Run({x}));
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) {
        absl::StatusOr<std::vector<NamedTensor>> got = model->Run({inputs[t]});
        if (!got.ok() || !alone[t].ok() || !torch::allclose((*got)[0].tensor, (*alone[t])[0].tensor)) ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);

  model.reset();
  for (const std::string& f : added) EXPECT_FALSE(std::filesystem::exists(f)) << f << " outlived its model";
}

}  // namespace
}  // namespace infergate
