#include "service/modelmesh/model_mesh_path.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace infergate {
namespace {

namespace fs = std::filesystem;

class ModelMeshPathTest : public ::testing::Test {
 protected:
  ModelMeshPathTest()
      : base_(fs::temp_directory_path() / ("ig_mmpath_" + std::to_string(::getpid()) + "_" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(base_);
    root_ = base_ / "models";
    Model(root_ / "plain");          // a model folder
    Model(root_ / "repo" / "only");  // a repository of one model
    Model(root_ / "two" / "a");      // ... of two
    Model(root_ / "two" / "b");
    fs::create_directories(root_ / "versions_only" / "3");
    std::ofstream(root_ / "versions_only" / "3" / "model.pt") << "x";
    fs::create_directories(root_ / "empty");
    std::ofstream(root_ / "file.pt") << "x";
    Model(base_ / "outside");
    fs::create_directory_symlink(base_ / "outside", root_ / "link_out");
    fs::create_directory_symlink(root_ / "plain", root_ / "link_in");
  }
  ~ModelMeshPathTest() override { fs::remove_all(base_); }
  static void Model(const fs::path& dir) {
    fs::create_directories(dir / "1");
    std::ofstream(dir / "config.pbtxt") << "";
    std::ofstream(dir / "1" / "model.pt") << "x";
  }
  fs::path base_;
  fs::path root_;
};

struct PathCase {
  const char* path;         // under the test's base folder, unless absolute or empty
  bool relative;            // given as written, not under the base
  const char* resolves_to;  // under the base; null: refused
  const char* expect_in_message;
};

TEST_F(ModelMeshPathTest, ResolvesModelFoldersAndRefusesTheRest) {
  const PathCase cases[] = {
      {"models/plain", false, "models/plain", nullptr},
      {"models/plain/", false, "models/plain", nullptr},
      {"models/repo", false, "models/repo/only", nullptr},
      {"models/versions_only", false, "models/versions_only", nullptr},
      {"models/link_in", false, "models/plain", nullptr},
      {"models/two", false, nullptr, "holds 2 model folders"},
      {"models/empty", false, nullptr, "holds no model"},
      {"models/file.pt", false, nullptr, "not a folder"},
      {"models/missing", false, nullptr, "cannot be read"},
      {"outside", false, nullptr, "not under the model root"},
      {"models/link_out", false, nullptr, "not under the model root"},
      {"models/../outside", false, nullptr, "not under the model root"},
      {"models/plain", true, nullptr, "not an absolute path"},
      {"", true, nullptr, "is empty"},
  };
  for (const PathCase& c : cases) {
    const std::string path = c.relative ? std::string(c.path) : (base_ / c.path).string();
    absl::StatusOr<std::string> got = ResolveModelMeshPath(path, root_.string());
    if (c.resolves_to) {
      ASSERT_TRUE(got.ok()) << c.path << ": " << got.status();
      EXPECT_EQ(*got, fs::canonical(base_ / c.resolves_to).string()) << c.path;
    } else {
      ASSERT_FALSE(got.ok()) << c.path << " resolved to " << *got;
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << c.path;
      EXPECT_NE(got.status().message().find("modelPath"), std::string::npos) << got.status();
      EXPECT_NE(got.status().message().find(c.expect_in_message), std::string::npos) << got.status();
    }
  }
  // Without a root, any readable folder.
  EXPECT_TRUE(ResolveModelMeshPath((base_ / "outside").string(), "").ok());
}

TEST(ModelMeshTypeTest, ServesPyTorchOnly) {
  for (const char* ok : {"", "pytorch", "PyTorch", "pytorch:2", "torchscript"}) {
    EXPECT_TRUE(CheckModelMeshType(ok).ok()) << ok;
  }
  for (const char* refused : {"onnx", "tensorflow", "pytorch2", "triton"}) {
    absl::Status s = CheckModelMeshType(refused);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << refused;
    EXPECT_NE(s.message().find("modelType"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace infergate
