#include "common/folder_entries.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/scratch_dir.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Names(const std::vector<fs::directory_entry>& entries) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : entries) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(FolderEntries, ListsAFolderWithoutDescending) {
  testing::ScratchDir dir("ig_entries_");
  ASSERT_FALSE(dir.path().empty());
  fs::create_directories(fs::path(dir.path()) / "1" / "inner");
  std::ofstream(fs::path(dir.path()) / "config.pbtxt") << "name: \"m\"";
  std::error_code error = std::make_error_code(std::errc::io_error);  // cleared by a good read
  EXPECT_EQ(Names(FolderEntries(dir.path(), &error)), (std::vector<std::string>{"1", "config.pbtxt"}));
  EXPECT_FALSE(error) << error.message();
}

// A folder that cannot be read is an error code, never an exception.
TEST(FolderEntries, AFolderThatCannotBeReadIsAnErrorNotAnException) {
  testing::ScratchDir dir("ig_entries_");
  ASSERT_FALSE(dir.path().empty());
  std::error_code error;
  EXPECT_TRUE(FolderEntries(fs::path(dir.path()) / "missing", &error).empty());
  EXPECT_EQ(error, std::errc::no_such_file_or_directory);
  std::ofstream(fs::path(dir.path()) / "file") << "x";
  EXPECT_TRUE(FolderEntries(fs::path(dir.path()) / "file", &error).empty());
  EXPECT_TRUE(error);
}

}  // namespace
}  // namespace infergate
