// A compiled package (.pt2) loaded by AotiModel, run the way workers run it.
// The package is made at test time with Debian's python3-torch
// (tools/make_pt2_models.py --mlp), as a PyTorch 2.x user makes one.

#include "scheduler/loaders/aoti/aoti_model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>

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

#include "scheduler/loaders/aoti/aoti_library_check.h"
#include "scheduler/repository/model_repository.h"
#include "tests/common/build_paths.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/tmpdir_override.h"
#include "tests/common/zip_writer.h"

namespace infergate {
namespace {

// Writes `pt2`: a package whose one CPU variant is the compiled library at
// `library` (a .so made by the test); returns `pt2`.
std::string PackageOfLibrary(const std::string& library, const std::string& pt2) {
  std::stringstream bytes;
  bytes << std::ifstream(library, std::ios::binary).rdbuf();
  std::ofstream(pt2, std::ios::binary) << testing::ZipOf(
      {{"data/aotinductor/model/x_metadata.json", R"({"AOTI_DEVICE_KEY": "cpu"})"},
       {"data/aotinductor/model/x.so", bytes.str()}});
  return pt2;
}

class AotiModelTest : public ::testing::Test {
 protected:
  // One package for the whole binary: a compile takes seconds.
  static void SetUpTestSuite() {
    const std::string root = testing::ProcessScratchDir().path();
    const std::string log = root + "/make_pt2_models.log";
    const std::string command = std::string(testing::TestPython3()) + " " + testing::MakePt2ModelsScript() + " --mlp " +
                                root + " >" + log + " 2>&1";
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
  // With one instance the runs take turns on it; with three, the three
  // threads' first runs go into the container at once, each on its own
  // instance.
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

// The folders under TMPDIR, pointed at a folder of the test's own.
std::set<std::string> Folders(const testing::TmpdirOverride& temp) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(temp.path())) out.insert(e.path().string());
  return out;
}

// Whether this process has a file below `folder` mapped (an opened library).
bool MapsFileBelow(const std::string& folder) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find(folder + "/") != std::string::npos) return true;
  }
  return false;
}

// Two instances are one container of two: one unpacked folder (under
// TMPDIR), one copy of the constants, the bytes of one instance; two
// workers run at once and every answer is the one the same input gets
// alone.
TEST_F(AotiModelTest, InstancesShareOneUnpackedCopyAndRunsAnswerRight) {
  testing::TmpdirOverride temp("ig_aoti_tmp_");
  std::shared_ptr<AotiModel> one = Load(1);
  ASSERT_NE(one, nullptr);
  const std::set<std::string> before = Folders(temp);
  ASSERT_EQ(before.size(), 1u) << "a load unpacks into one folder under TMPDIR";
  std::shared_ptr<AotiModel> model = Load(2);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->instances(), 2u);
  EXPECT_EQ(one->instances(), 1u);
  EXPECT_EQ(model->resident_bytes(), one->resident_bytes()) << "the instances share the constants";
  std::set<std::string> added;
  for (const std::string& f : Folders(temp)) {
    if (!before.count(f)) added.insert(f);
  }
  ASSERT_EQ(added.size(), 1u) << "one unpacked folder for both instances";
  const std::string folder = *added.begin();
  EXPECT_EQ(std::filesystem::path(folder).filename().string().rfind("infergate-aoti-", 0), 0u) << folder;
  EXPECT_TRUE(MapsFileBelow(folder)) << "the library is opened from " << folder;

  // The warm-up runs every instance and answers as a run does.
  const at::Tensor warm_input = torch::randn({1, 16});
  absl::StatusOr<std::vector<NamedTensor>> warm = model->WarmUp({warm_input});
  absl::StatusOr<std::vector<NamedTensor>> warm_alone = one->Run({warm_input});
  ASSERT_TRUE(warm.ok()) << warm.status();
  ASSERT_TRUE(warm_alone.ok()) << warm_alone.status();
  EXPECT_TRUE(torch::allclose((*warm)[0].tensor, (*warm_alone)[0].tensor));

  // More threads than instances: the runs past two wait for a turn.
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

  // A library dlclose cannot unload (GNU unique symbols, which PyTorch
  // 2.15's AOTInductor writes, and 2.6's does not) stays mapped, as its
  // load's warning says; any other is closed with its model.
  bool stays_loaded = false;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(folder)) {
    if (entry.path().extension() != ".so") continue;
    absl::StatusOr<ElfLinkage> linkage = ReadElfLinkage(entry.path().string());
    ASSERT_TRUE(linkage.ok()) << linkage.status();
    stays_loaded |= StaysLoadedOnceOpened(*linkage);
  }
  model.reset();
  EXPECT_FALSE(std::filesystem::exists(folder)) << folder << " outlived its model";
  EXPECT_EQ(MapsFileBelow(folder), stays_loaded) << (stays_loaded ? "a library that cannot be unloaded was unmapped"
                                                                  : "the library stayed open after its model went");
  one.reset();
  EXPECT_TRUE(Folders(temp).empty());
}

// A package whose library cannot be opened is refused, naming the variant
// and why, and leaves nothing unpacked.
TEST_F(AotiModelTest, ALibraryThatCannotBeOpenedIsRefusedAndLeavesNothing) {
  testing::TmpdirOverride temp("ig_aoti_tmp_");
  const std::string package = testing::ProcessScratchDir().File(
      "junk_", testing::ZipOf({{"data/aotinductor/model/x_metadata.json", R"({"AOTI_DEVICE_KEY": "cpu"})"},
                               {"data/aotinductor/model/x.so",
                                "\x7f"
                                "ELF not a library"}}));
  absl::StatusOr<v1::ModelConfig> config = ReadModelConfig(*folder_, "mlp_pt2");
  ASSERT_TRUE(config.ok()) << config.status();
  std::filesystem::rename(package, package + ".pt2");
  DeviceInfo cpu;
  absl::StatusOr<std::shared_ptr<AotiModel>> model =
      AotiModel::Load(package + ".pt2", *config, cpu, DType::kFloat32, nullptr, 2);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition) << model.status();
  EXPECT_NE(model.status().message().find("AOTInductor cannot load variant 'model'"), std::string::npos)
      << model.status();
  EXPECT_TRUE(Folders(temp).empty()) << "a refused load left " << *Folders(temp).begin();

  // A real library that needs a runtime function this LibTorch lacks, as
  // one compiled by a newer PyTorch does: refused before it is opened, the
  // function and this server's LibTorch version named, with the cause.
  const std::string root = testing::ProcessScratchDir().path();
  std::ofstream(root + "/newer.c") << "extern int aoti_torch_from_a_newer_pytorch(void);\n"
                                      "int AOTInductorModelContainerCreateWithDevice(void) {\n"
                                      "  return aoti_torch_from_a_newer_pytorch();\n}\n";
  const std::string compile = "cc -shared -fPIC -o " + root + "/newer.so " + root + "/newer.c";
  ASSERT_EQ(std::system(compile.c_str()), 0) << compile;
  const std::string newer = PackageOfLibrary(root + "/newer.so", root + "/newer.pt2");
  model = AotiModel::Load(newer, *config, cpu, DType::kFloat32);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition) << model.status();
  for (const std::string& part : {std::string("aoti_torch_from_a_newer_pytorch"),
                                  "compiled by a PyTorch newer than " + std::string(TORCH_VERSION),
                                  "this server's LibTorch " + std::string(TORCH_VERSION)}) {
    EXPECT_NE(model.status().message().find(part), std::string::npos) << part << " in " << model.status();
  }
  EXPECT_TRUE(Folders(temp).empty());

  // A library that links a LibTorch this process has not loaded (as one
  // exported beside another LibTorch does): refused before it is opened,
  // which would bring that second LibTorch into the process.
  std::ofstream(root + "/empty.c") << "int libtorch_stub;\n";
  std::ofstream(root + "/foreign.c") << "int AOTInductorModelContainerCreateWithDevice(void) { return 0; }\n";
  const std::string link_foreign = "cc -shared -fPIC -Wl,-soname,libtorch.so.99 -o " + root + "/libtorch.so.99 " +
                                   root + "/empty.c && cc -shared -fPIC -Wl,--no-as-needed -o " + root +
                                   "/foreign.so " + root + "/foreign.c " + root + "/libtorch.so.99";
  ASSERT_EQ(std::system(link_foreign.c_str()), 0) << link_foreign;
  const std::string foreign = PackageOfLibrary(root + "/foreign.so", root + "/foreign.pt2");
  model = AotiModel::Load(foreign, *config, cpu, DType::kFloat32);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition) << model.status();
  for (const std::string& part : {std::string("links libtorch.so.99"), std::string("second LibTorch"),
                                  "LibTorch " + std::string(TORCH_VERSION)}) {
    EXPECT_NE(model.status().message().find(part), std::string::npos) << part << " in " << model.status();
  }
  EXPECT_TRUE(Folders(temp).empty());
}

}  // namespace
}  // namespace infergate
