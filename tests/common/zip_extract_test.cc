#include "common/zip_extract.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/file_util.h"
#include "tests/common/zip_writer.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;
using testing::ZipOf;
using testing::ZipWriterEntry;

class ZipExtractTest : public ::testing::Test {
 protected:
  ZipExtractTest() : root_(fs::temp_directory_path() / ("ig_zipx_" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_ / "out");
  }
  ~ZipExtractTest() override { fs::remove_all(root_); }

  std::string Archive(const std::vector<ZipWriterEntry>& entries) {
    const fs::path p = root_ / "a.zip";
    std::ofstream(p, std::ios::binary | std::ios::trunc) << ZipOf(entries);
    return p.string();
  }
  std::string out() const { return (root_ / "out").string(); }
  // Every path below the test's root but the archive and the output folder.
  size_t FilesOutsideOut() const {
    size_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(root_)) {
      const std::string p = e.path().string();
      if (p.rfind(out(), 0) != 0 && e.path().filename() != "a.zip") ++n;
    }
    return n;
  }
  bool OutIsEmpty() const { return fs::is_empty(root_ / "out"); }

  fs::path root_;
};

TEST_F(ZipExtractTest, ExtractsStoredAndDeflatedEntriesIntoFolders) {
  const std::string big(200000, 'x');
  absl::StatusOr<uint64_t> n = ExtractZip(Archive({{"MAR-INF/MANIFEST.json", "{}"},
                                                   {"model.pt", big, /*deflate=*/true},
                                                   {"extra/", ""},
                                                   {"extra/labels.json", "{\"0\": \"cat\"}", true}}),
                                          out(), {});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 2 + big.size() + 12);
  EXPECT_EQ(*ReadFile(out() + "/model.pt"), big);
  EXPECT_EQ(*ReadFile(out() + "/MAR-INF/MANIFEST.json"), "{}");
  EXPECT_EQ(*ReadFile(out() + "/extra/labels.json"), "{\"0\": \"cat\"}");
}

// Only the entries below one folder, at their full names; a bad entry
// elsewhere is not looked at, one below it is still refused.
TEST_F(ZipExtractTest, ExtractsOnlyTheEntriesUnderAFolder) {
  const std::string archive = Archive({{"data/aotinductor/cpu/a.so", "cpu library"},
                                       {"data/aotinductor/cuda/a.so", "cuda library", true},
                                       {"data/aotinductor/cpuish/a.so", "not below data/aotinductor/cpu/"},
                                       {"../elsewhere", "never written"},
                                       {"data/aotinductor/cpu/sub/b.json", "{}", true}});
  absl::StatusOr<uint64_t> n = ExtractZip(archive, out(), {}, "data/aotinductor/cpu/");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 11u + 2u);
  EXPECT_EQ(*ReadFile(out() + "/data/aotinductor/cpu/a.so"), "cpu library");
  EXPECT_EQ(*ReadFile(out() + "/data/aotinductor/cpu/sub/b.json"), "{}");
  EXPECT_FALSE(fs::exists(out() + "/data/aotinductor/cuda"));
  EXPECT_FALSE(fs::exists(out() + "/data/aotinductor/cpuish"));
  EXPECT_EQ(FilesOutsideOut(), 0u);

  fs::remove_all(out());
  fs::create_directories(out());
  absl::StatusOr<uint64_t> bad =
      ExtractZip(Archive({{"data/aotinductor/cpu/ok.so", "fine"}, {"data/aotinductor/cpu/../../evil", "owned"}}), out(),
                 {}, "data/aotinductor/cpu/");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_TRUE(OutIsEmpty());
}

TEST_F(ZipExtractTest, RefusesNamesThatLeaveTheFolderAndLeavesNothing) {
  for (const std::string name : {"../evil", "a/../../evil", "/tmp/evil", "a\\..\\evil", "C:evil", "./a", "a//b"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<uint64_t> n = ExtractZip(Archive({{"ok.txt", "fine"}, {name, "owned"}}), out(), {});
    ASSERT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(n.status().message().find("outside the archive's folder"), std::string::npos) << n.status();
    EXPECT_TRUE(OutIsEmpty());
    EXPECT_EQ(FilesOutsideOut(), 0u);
  }
}

TEST_F(ZipExtractTest, RefusesLinksAndNamesTwice) {
  absl::StatusOr<uint64_t> link = ExtractZip(Archive({{"link", "/etc/passwd", false, 0120777}}), out(), {});
  EXPECT_EQ(link.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(link.status().message().find("symbolic link"), std::string::npos) << link.status();
  // A link first, then a file through it, is the classic escape; the link
  // alone is refused, and a name given twice cannot replace the first.
  absl::StatusOr<uint64_t> twice = ExtractZip(Archive({{"a", "one"}, {"a", "two"}}), out(), {});
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(twice.status().message().find("appears twice"), std::string::npos) << twice.status();
  EXPECT_TRUE(OutIsEmpty());
}

// Entries that share bytes (a small archive that inflates one payload many
// times) and local headers that name another file than the central
// directory does are refused, and nothing is written.
TEST_F(ZipExtractTest, RefusesOverlappingEntriesAndNamesThatDisagree) {
  // "b"'s local record lies inside "a"'s stored data.
  const std::string inner = ZipOf({{"b", "payload"}});
  const std::string b_record = inner.substr(0, 30 + 1 + 7);
  ZipWriterEntry a{"a", b_record};
  ZipWriterEntry b{"b", "payload"};
  b.directory_only = true;
  b.local_at = 30 + 1;  // where "a"'s data begins
  absl::StatusOr<uint64_t> overlap = ExtractZip(Archive({a, b}), out(), {});
  EXPECT_EQ(overlap.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(overlap.status().message().find("entries 'a' and 'b' overlap"), std::string::npos) << overlap.status();
  EXPECT_TRUE(OutIsEmpty());

  ZipWriterEntry renamed{"model.pt", "bytes"};
  renamed.local_name = "../evil";
  absl::StatusOr<uint64_t> mismatch = ExtractZip(Archive({renamed}), out(), {});
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("is named '../evil' in its local header"), std::string::npos)
      << mismatch.status();
  EXPECT_TRUE(OutIsEmpty());
  EXPECT_EQ(FilesOutsideOut(), 0u);
}

TEST_F(ZipExtractTest, CountsWhatEntriesInflateToNotWhatTheyDeclare) {
  const std::string zeros(4 << 20, '\0');  // deflates to a few KiB
  ZipExtractLimits limits;
  limits.max_total_bytes = 1 << 20;
  absl::StatusOr<uint64_t> honest = ExtractZip(Archive({{"weights", zeros, true}}), out(), limits);
  EXPECT_EQ(honest.status().code(), absl::StatusCode::kResourceExhausted) << honest.status();
  EXPECT_NE(honest.status().message().find("limit of 1048576 bytes"), std::string::npos) << honest.status();
  // The same entry declaring a small size is stopped once it writes past it.
  ZipWriterEntry lying{"weights", zeros, true};
  lying.declared_size = 1000;
  absl::StatusOr<uint64_t> lies = ExtractZip(Archive({lying}), out(), limits);
  EXPECT_EQ(lies.status().code(), absl::StatusCode::kInvalidArgument) << lies.status();
  EXPECT_NE(lies.status().message().find("past its declared size"), std::string::npos) << lies.status();
  EXPECT_TRUE(OutIsEmpty());
}

TEST_F(ZipExtractTest, RefusesADamagedEntry) {
  ZipWriterEntry crc{"model.pt", "payload", true};
  crc.bad_crc = true;
  absl::StatusOr<uint64_t> n = ExtractZip(Archive({crc}), out(), {});
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(n.status().message().find("CRC-32"), std::string::npos) << n.status();
  // Cut the file inside the entry's data: the listing itself fails.
  const std::string bytes = ZipOf({{"model.pt", std::string(5000, 'y'), false}});
  std::ofstream(root_ / "a.zip", std::ios::binary | std::ios::trunc) << bytes.substr(0, 3000);
  EXPECT_FALSE(ExtractZip((root_ / "a.zip").string(), out(), {}).ok());
  EXPECT_TRUE(OutIsEmpty());
}

TEST(ZipEntryNames, SafeAndUnsafe) {
  EXPECT_TRUE(IsSafeZipEntryName("model.pt"));
  EXPECT_TRUE(IsSafeZipEntryName("MAR-INF/MANIFEST.json"));
  EXPECT_TRUE(IsSafeZipEntryName("folder/"));
  EXPECT_TRUE(IsSafeZipEntryName("a..b/c"));
  EXPECT_FALSE(IsSafeZipEntryName(""));
  EXPECT_FALSE(IsSafeZipEntryName("/"));
  EXPECT_FALSE(IsSafeZipEntryName(".."));
  EXPECT_FALSE(IsSafeZipEntryName("a/.."));
  EXPECT_FALSE(IsSafeZipEntryName(std::string("a\0b", 3)));
  EXPECT_FALSE(IsSafeZipEntryName(std::string(kMaxZipNameBytes + 1, 'a')));
}

}  // namespace
}  // namespace infergate
