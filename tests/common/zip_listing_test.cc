#include "common/zip_listing.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/common/zip_writer.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;

using testing::StoredZip;

class ZipListingTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& bytes) {
    const fs::path p = fs::temp_directory_path() /
                       ("ig_zip_" + std::to_string(::getpid()) + "_" + std::to_string(files_.size()) + ".zip");
    std::ofstream(p, std::ios::binary) << bytes;
    files_.push_back(p);
    return p.string();
  }
  ~ZipListingTest() override {
    for (const fs::path& p : files_) fs::remove(p);
  }
  std::vector<fs::path> files_;
};

TEST_F(ZipListingTest, ListsEntriesAndReadsAStoredOne) {
  const std::string path = Write(StoredZip({{"version", "3"}, {"data/aotinductor/cpu/m_metadata.json", "{}"}}));
  absl::StatusOr<std::vector<ZipEntry>> entries = ListZip(path);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[1].name, "data/aotinductor/cpu/m_metadata.json");
  EXPECT_EQ(*ReadStoredZipEntry(path, (*entries)[1], 100), "{}");
  EXPECT_EQ(*ReadStoredZipEntry(path, (*entries)[0], 100), "3");
  EXPECT_EQ(ReadStoredZipEntry(path, (*entries)[1], 1).status().code(), absl::StatusCode::kInvalidArgument);
}

// Every truncation of a good archive, and bytes flipped in its directory,
// give an error or a listing, never a read outside the file.
TEST_F(ZipListingTest, DamagedArchivesAreRefusedNotOverread) {
  const std::string good = StoredZip({{"a", "hello"}, {"b/c", "world"}});
  for (size_t n = 0; n < good.size(); ++n) {
    absl::StatusOr<std::vector<ZipEntry>> entries = ListZip(Write(good.substr(0, n)));
    EXPECT_FALSE(entries.ok()) << "truncated to " << n;
  }
  for (size_t at = 0; at < good.size(); ++at) {
    std::string bad = good;
    bad[at] = static_cast<char>(0xFF);
    const std::string path = Write(bad);
    absl::StatusOr<std::vector<ZipEntry>> entries = ListZip(path);
    if (!entries.ok()) continue;
    for (const ZipEntry& e : *entries) (void)ReadStoredZipEntry(path, e, 1 << 20);
  }
  EXPECT_EQ(ListZip("/nonexistent/x.zip").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace infergate
