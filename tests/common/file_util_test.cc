#include "common/file_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace infergate {
namespace {

std::string TempPath(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string(name) + "." + std::to_string(::getpid()))).string();
}

TEST(FileUtil, WrittenFilesReadBackByteForByte) {
  std::string path = TempPath("file_util_roundtrip");
  std::string contents("binary\0bytes\n", 13);
  ASSERT_TRUE(WriteFileAtomically(path, contents).ok());
  absl::StatusOr<std::string> back = ReadFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, contents);
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  EXPECT_EQ(*ReadFile(path), "");
  std::filesystem::remove(path);
}

TEST(FileUtil, MissingFileIsNotFoundAndNamesWhatWasRead) {
  absl::StatusOr<std::string> missing = ReadFile("/nonexistent/infergate/token", "--auth-token-file");
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("--auth-token-file"), absl::string_view::npos);
  EXPECT_NE(missing.status().message().find("/nonexistent/infergate/token"), absl::string_view::npos);
}

TEST(FileUtil, WriteIntoMissingFolderFailsCleanly) {
  EXPECT_FALSE(WriteFileAtomically("/nonexistent/infergate/state", "x").ok());
}

}  // namespace
}  // namespace infergate
