#include "scheduler/repository/model_upload.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/zip_writer.h"

namespace infergate {
namespace {
namespace fs = std::filesystem;

TEST(ModelUploadTest, PathsStayInsideTheModelsFolder) {
  for (const char* good : {"1/model.pt", "labels.txt", "12/sub/data.bin", "config.pbtxt"}) {
    EXPECT_TRUE(CheckUploadPath(good).ok()) << good;
  }
  for (const std::string& bad :
       std::vector<std::string>{"", "/etc/passwd", "../x", "1/../../x", "./1/model.pt", "1//model.pt", "1/", "a\\b",
                                std::string("a\0b", 3), "a/b/c/d/e", std::string(300, 'x')}) {
    absl::Status s = CheckUploadPath(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// Native code is known by name, by its first bytes, and inside a zip
// (deflated or not); TorchScript archives and data files pass.
TEST(ModelUploadTest, NativeCodeIsRefusedByNameHeaderOrArchiveEntry) {
  auto refused = [](const std::string& path, const std::string& content) {
    const absl::Status s = CheckNotNativeCode(path, content);
    return s.code() == absl::StatusCode::kPermissionDenied && s.message().find("file:" + path) != std::string::npos &&
           s.message().find("--allow-native-uploads") != std::string::npos;
  };
  for (const char* name : {"1/model.pt2", "1/libx.so", "1/libx.so.1", "1/x.dylib", "1/x.DLL", "1/MODEL.PT2"}) {
    EXPECT_TRUE(refused(name, "anything")) << name;
  }
  EXPECT_TRUE(refused("1/weights.bin", std::string("\x7f"
                                                   "ELF\x02\x01\x01",
                                                   7)));
  EXPECT_TRUE(refused("1/weights.bin", std::string("\xcf\xfa\xed\xfe", 4) + "macho"));
  std::string pe(0x80, '\0');
  pe[0] = 'M';
  pe[1] = 'Z';
  pe[0x3c] = 0x40;
  pe.replace(0x40, 4, std::string("PE\0\0", 4));
  EXPECT_TRUE(refused("1/weights.bin", pe));
  EXPECT_TRUE(refused("1/model.pt", testing::StoredZip({{"model/data/aotinductor/model/x.so", "code"}})));
  EXPECT_TRUE(refused("1/model.pt", testing::ZipOf({{"a/b.so", "code", /*deflate=*/true}})));
  EXPECT_TRUE(refused("1/model.pt", "PK\x03\x04 not really a zip"));
  EXPECT_TRUE(
      CheckNotNativeCode("1/model.pt", testing::StoredZip({{"model/data.pkl", "x"}, {"model/version", "3"}})).ok());
  EXPECT_TRUE(CheckNotNativeCode("labels.txt", "MZ but no PE header follows").ok());
  EXPECT_TRUE(CheckNotNativeCode("config.pbtxt", "name: \"m\"").ok());
}

TEST(ModelUploadTest, OnlyAVersionFolderNamedPlainlyHoldsAModel) {
  EXPECT_TRUE(IsVersionModelFile("1/model.pt"));
  EXPECT_TRUE(IsVersionModelFile("42/model.pt"));
  EXPECT_TRUE(IsVersionModelFile("3/model.pt2"));
  for (const char* not_model : {"model.pt", "01/model.pt", "a/model.pt", "1/model.pth", "1/x/model.pt", "model.pt2",
                                "1/model.pt3", "1/x/model.pt2"}) {
    EXPECT_FALSE(IsVersionModelFile(not_model)) << not_model;
  }
}

TEST(ModelUploadTest, WritesAFreshPrivateFolderAndRemovesItWithEverythingIn) {
  std::string root;
  {
    UploadFolders uploads;
    absl::StatusOr<std::string> a = uploads.Write("m", {{"1/model.pt", "abc"}, {"labels.txt", "x\n"}});
    ASSERT_TRUE(a.ok()) << a.status();
    absl::StatusOr<std::string> b = uploads.Write("m", {{"1/model.pt", "def"}});
    ASSERT_TRUE(b.ok());
    EXPECT_NE(*a, *b);
    EXPECT_EQ(fs::path(*a).filename(), "m");
    std::ifstream in(fs::path(*a) / "1" / "model.pt");
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(content, "abc");
    root = fs::path(*a).parent_path().parent_path().string();
    EXPECT_EQ(fs::status(root).permissions() & fs::perms::all, fs::perms::owner_all);
    uploads.Remove(*a);
    EXPECT_FALSE(fs::exists(fs::path(*a).parent_path()));
    EXPECT_TRUE(fs::exists(*b));
    uploads.Remove("/etc/x/y");  // not one of its folders: nothing happens
    EXPECT_TRUE(fs::exists("/etc"));
    EXPECT_FALSE(uploads.Write("../m", {{"1/model.pt", "x"}}).ok());
    EXPECT_FALSE(uploads.Write("m", {{"../1/model.pt", "x"}}).ok());
  }
  EXPECT_FALSE(fs::exists(root));
}

}  // namespace
}  // namespace infergate
