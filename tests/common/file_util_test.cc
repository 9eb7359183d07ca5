#include "common/file_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
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

// A FIFO (or a folder) where a file is expected is refused at once: opening
// a FIFO to read it waited for a writer forever (a FIFO config.pbtxt hung
// the server's start-up).
TEST(FileUtil, AFifoOrAFolderIsRefusedWithoutBlocking) {
  std::string fifo = TempPath("file_util_fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<std::string> read = ReadFile(fifo, "config.pbtxt");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(read.status().message().find("config.pbtxt: " + fifo + " is not a regular file"), std::string::npos)
      << read.status();
  std::filesystem::remove(fifo);
  EXPECT_EQ(ReadFile(std::filesystem::temp_directory_path().string()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // /proc files report no size but read whole.
  absl::StatusOr<std::string> self = ReadFile("/proc/self/status");
  ASSERT_TRUE(self.ok()) << self.status();
  EXPECT_NE(self->find("VmRSS"), std::string::npos);
}

TEST(FileUtil, WriteIntoMissingFolderFailsCleanly) {
  EXPECT_FALSE(WriteFileAtomically("/nonexistent/infergate/state", "x").ok());
}

}  // namespace
}  // namespace infergate
