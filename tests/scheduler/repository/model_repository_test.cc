#include "scheduler/repository/model_repository.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace infergate {
namespace {

namespace fs = std::filesystem;

class ModelRepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("ig_repo_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void AddVersion(const std::string& model, const std::string& version) {
    fs::create_directories(root_ / model / version);
    std::ofstream(root_ / model / version / "model.pt") << "x";
  }
  void Config(const std::string& model, const std::string& text) {
    fs::create_directories(root_ / model);
    std::ofstream(root_ / model / "config.pbtxt") << text;
  }

  fs::path root_;
};

TEST_F(ModelRepositoryTest, ScansModelsAndIntegerVersions) {
  AddVersion("a", "1");
  AddVersion("a", "10");
  AddVersion("a", "2");
  AddVersion("a", "latest");  // not an integer: ignored
  AddVersion("a", "01");      // not written plainly: ignored, so it cannot collide with "1"
  AddVersion("a", "002");
  fs::create_directories(root_ / "a" / "3");  // no model.pt: ignored
  Config("a", "max_batch_size: 4 version_policy { all {} }");
  ModelRepository repo(root_.string());
  ASSERT_TRUE(repo.Scan().ok());
  auto a = repo.Find("a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->versions, (std::vector<int64_t>{1, 2, 10}));
  EXPECT_EQ((*a)->config.max_batch_size(), 4u);
  EXPECT_EQ(*repo.ResolveVersion(**a, ""), 10);
  EXPECT_EQ(*repo.ResolveVersion(**a, "2"), 2);
  EXPECT_EQ(repo.ResolveVersion(**a, "3").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(repo.ResolveVersion(**a, "v2").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(repo.ResolveVersion(**a, "-1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(repo.ModelFile(**a, 2), (root_ / "a" / "2" / "model.pt").string());
}

// A config.pbtxt that is a FIFO is reported on use like any broken config,
// instead of hanging the scan that reads it.
TEST_F(ModelRepositoryTest, AFifoConfigIsRefusedNotWaitedOn) {
  AddVersion("f", "1");
  ASSERT_EQ(::mkfifo((root_ / "f" / "config.pbtxt").c_str(), 0600), 0);
  ModelRepository repo(root_.string());
  ASSERT_TRUE(repo.Scan().ok());
  auto f = repo.Find("f");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("not a regular file"), std::string::npos) << f.status();
}

TEST_F(ModelRepositoryTest, UnknownAndEscapingNames) {
  AddVersion("a", "1");
  ModelRepository repo(root_.string());
  ASSERT_TRUE(repo.Scan().ok());
  EXPECT_EQ(repo.Find("b").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(repo.Find("../a").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(repo.Find(root_.string() + "/a").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelRepositoryTest, BrokenConfigIsReportedOnUse) {
  AddVersion("bad", "1");
  Config("bad", "max_batch_size: {");
  AddVersion("good", "1");
  ModelRepository repo(root_.string());
  ASSERT_TRUE(repo.Scan().ok());
  auto bad = repo.Find("bad");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(bad.status().message().find("config.pbtxt"), absl::string_view::npos) << bad.status();
  EXPECT_TRUE(repo.Find("good").ok());
}

// The ports answer before the first scan: a request then for a model the
// repository may well hold is told the server is starting (UNAVAILABLE, a
// retry helps), never that the model does not exist; once read, unknown is
// NOT_FOUND.
TEST_F(ModelRepositoryTest, BeforeTheFirstScanANameIsUnavailableNotUnknown) {
  AddVersion("a", "1");
  ModelRepository repo(root_.string());
  for (const char* name : {"a", "b"}) {
    absl::Status early = repo.Find(name).status();
    EXPECT_EQ(early.code(), absl::StatusCode::kUnavailable) << name << ": " << early;
    EXPECT_NE(early.message().find("has not read its model repository yet"), absl::string_view::npos) << early;
  }
  EXPECT_EQ(repo.Find("../a").status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(repo.Scan().ok());
  EXPECT_TRUE(repo.Find("a").ok());
  EXPECT_EQ(repo.Find("b").status().code(), absl::StatusCode::kNotFound);
}

// Requests read the view only: what is added to disk after the scan is not
// seen until the lifecycle publishes it (the poller, or LoadModel).
TEST_F(ModelRepositoryTest, TheViewDoesNotReadTheDisk) {
  AddVersion("a", "1");
  ModelRepository repo(root_.string());
  ASSERT_TRUE(repo.Scan().ok());
  AddVersion("late", "1");
  AddVersion("a", "5");
  EXPECT_EQ(repo.Find("late").status().code(), absl::StatusCode::kNotFound);
  auto a = repo.Find("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(repo.ResolveVersion(**a, "5").status().code(), absl::StatusCode::kNotFound);
}

// Without a version_policy the latest version alone is served (Triton's
// default); the others are on disk, UNAVAILABLE, and a request for one says why.
TEST_F(ModelRepositoryTest, DefaultPolicyServesTheLatestVersion) {
  AddVersion("a", "1");
  AddVersion("a", "3");
  ModelRepository repo(root_.string());
  ASSERT_TRUE(repo.Scan().ok());
  auto a = repo.Find("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->versions, (std::vector<int64_t>{3}));
  ASSERT_EQ((*a)->states.size(), 2u);
  EXPECT_EQ((*a)->states[0].state, VersionState::kUnavailable);
  absl::Status old = repo.ResolveVersion(**a, "1").status();
  EXPECT_EQ(old.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(old.message().find("version_policy serves the latest version"), absl::string_view::npos) << old;
  EXPECT_EQ(*repo.ResolveVersion(**a, ""), 3);
}

TEST_F(ModelRepositoryTest, MissingRootFailsScan) {
  ModelRepository repo((root_ / "nope").string());
  EXPECT_EQ(repo.Scan().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace infergate
