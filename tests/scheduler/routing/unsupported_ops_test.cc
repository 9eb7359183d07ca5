#include "scheduler/routing/unsupported_ops.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;

constexpr char kOpsTorch[] = "1.13.1";
constexpr char kOpsFile[] = "4096:1700000000000000000";

class UnsupportedOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ig_state_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(UnsupportedOpsTest, LearnedLimitsSurviveARestart) {
  std::string path = (dir_ / "state").string();
  {
    UnsupportedOpTable table(path, kOpsTorch);
    ASSERT_TRUE(table.Load().ok());  // no file yet
    EXPECT_TRUE(table.empty());
    EXPECT_TRUE(table.Record("cnn", kOpsFile, DeviceKind::kMps,
                             FallbackReason{FallbackKind::kUnsupportedOp, "aten::max_pool2d"}));
    EXPECT_FALSE(table.Record("cnn", kOpsFile, DeviceKind::kMps,
                              FallbackReason{FallbackKind::kUnsupportedOp, "aten::max_pool2d"}));
    EXPECT_TRUE(table.Record("poly", kOpsFile, DeviceKind::kMps, FallbackReason{FallbackKind::kDtype, "float64"}));
    EXPECT_TRUE(table.last_write_status().ok());
  }
  UnsupportedOpTable again(path, kOpsTorch);
  EXPECT_TRUE(again.empty());
  ASSERT_TRUE(again.Load().ok());
  EXPECT_FALSE(again.empty());  // what the file held counts
  EXPECT_EQ(again.Lookup("cnn", kOpsFile, DeviceKind::kMps)->ToString(), "unsupported_op:aten::max_pool2d");
  EXPECT_FALSE(again.Lookup("cnn", kOpsFile, DeviceKind::kCuda).has_value());
  EXPECT_EQ(again.ForKind(DeviceKind::kMps), (std::vector<std::string>{"cnn:aten::max_pool2d", "poly:float64"}));
  // Only the state file is left behind: no temporary files.
  int files = 0;
  for (auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1);
}

TEST_F(UnsupportedOpsTest, MalformedFileIsReportedAndIgnored) {
  std::string path = (dir_ / "state").string();
  std::ofstream(path) << "mps\tcnn\n";  // a torn line
  UnsupportedOpTable table(path, kOpsTorch);
  absl::Status s = table.Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(table.ForKind(DeviceKind::kMps).empty());
}

TEST_F(UnsupportedOpsTest, AtomicWriteReplacesWholeFiles) {
  std::string path = (dir_ / "f").string();
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second, longer").ok());
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "second, longer");
  EXPECT_FALSE(WriteFileAtomically((dir_ / "missing" / "f").string(), "x").ok());
}

// A process killed with SIGKILL in the middle of rewriting the state file
// leaves either the old or the new file: every kill point loads cleanly.
TEST_F(UnsupportedOpsTest, CrashMidWriteNeverCorruptsTheStateFile) {
  std::string path = (dir_ / "state").string();
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    pid_t child = fork();
    if (child == 0) {
      UnsupportedOpTable table(path, kOpsTorch);
      (void)table.Load();
      for (int i = 0;; ++i) {
        table.Record(std::string(200, 'm') + std::to_string(round) + "_" + std::to_string(i), kOpsFile,
                     DeviceKind::kMps, FallbackReason{FallbackKind::kUnsupportedOp, "aten::op" + std::to_string(i)});
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng() % 20000));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    UnsupportedOpTable reread(path, kOpsTorch);
    absl::Status s = reread.Load();
    ASSERT_TRUE(s.ok()) << "round " << round << ": " << s;
  }
  UnsupportedOpTable last(path, kOpsTorch);
  ASSERT_TRUE(last.Load().ok());
  EXPECT_FALSE(last.ForKind(DeviceKind::kMps).empty());
}

// Many workers learning limits at once: the file is written outside the
// table's lock, newest snapshot wins, and nothing learned is lost.
TEST_F(UnsupportedOpsTest, ConcurrentRecordsAllReachTheFile) {
  std::string path = (dir_ / "state").string();
  {
    UnsupportedOpTable table(path, kOpsTorch);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 25; ++i) {
          std::string model = absl::StrCat("m", t, "_", i);
          EXPECT_TRUE(table.Record(model, kOpsFile, DeviceKind::kMps, FallbackReason{FallbackKind::kDtype, "float64"}));
          EXPECT_TRUE(table.Lookup(model, kOpsFile, DeviceKind::kMps).has_value());
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_TRUE(table.last_write_status().ok()) << table.last_write_status();
  }
  UnsupportedOpTable reloaded(path, kOpsTorch);
  ASSERT_TRUE(reloaded.Load().ok());
  EXPECT_EQ(reloaded.ForKind(DeviceKind::kMps).size(), 200u);
}

// A replaced model.pt (another size or time) is tried on the device again,
// and so is everything learned under another LibTorch or the old format.
TEST_F(UnsupportedOpsTest, ReplacedFilesAndOtherLibTorchVersionsAreProbedAfresh) {
  std::string path = (dir_ / "state").string();
  {
    UnsupportedOpTable table(path, kOpsTorch);
    EXPECT_TRUE(
        table.Record("cnn", kOpsFile, DeviceKind::kMps, FallbackReason{FallbackKind::kUnsupportedOp, "aten::x"}));
    EXPECT_FALSE(table.Lookup("cnn", "4100:1700000000000000001", DeviceKind::kMps).has_value());
  }
  UnsupportedOpTable same(path, kOpsTorch);
  ASSERT_TRUE(same.Load().ok());
  EXPECT_TRUE(same.Lookup("cnn", kOpsFile, DeviceKind::kMps).has_value());
  UnsupportedOpTable newer(path, "2.1.0");
  ASSERT_TRUE(newer.Load().ok());
  EXPECT_FALSE(newer.Lookup("cnn", kOpsFile, DeviceKind::kMps).has_value());
  EXPECT_TRUE(newer.ForKind(DeviceKind::kMps).empty());

  std::ofstream(path) << "mps\tcnn\tunsupported_op:aten::x\n";  // the v1 format: no file, no LibTorch
  UnsupportedOpTable old_format(path, kOpsTorch);
  ASSERT_TRUE(old_format.Load().ok());
  EXPECT_TRUE(old_format.ForKind(DeviceKind::kMps).empty());
}

TEST_F(UnsupportedOpsTest, InMemoryTableWithoutAFile) {
  UnsupportedOpTable table("", kOpsTorch);
  EXPECT_TRUE(table.Load().ok());
  EXPECT_TRUE(table.empty());
  EXPECT_TRUE(table.Record("m", kOpsFile, DeviceKind::kMps, FallbackReason{FallbackKind::kDtype, "float64"}));
  EXPECT_FALSE(table.empty());
  EXPECT_TRUE(table.Lookup("m", kOpsFile, DeviceKind::kMps).has_value());
}

}  // namespace
}  // namespace infergate
