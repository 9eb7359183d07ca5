// UnpackedAotiVariant: one variant's files unpacked into a folder of its
// own under TMPDIR, its library picked, the folder gone with the object;
// folders of processes that are gone swept away. Packages here are zips
// written by the test (nothing is opened as a library).

#include "scheduler/loaders/aoti/aoti_unpacked_variant.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "common/file_util.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/tmpdir_override.h"
#include "tests/common/zip_writer.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;
using testing::ZipOf;
using testing::ZipWriterEntry;

class UnpackedAotiVariantTest : public ::testing::Test {
 protected:
  UnpackedAotiVariantTest() : packages_("ig_unpack_pkg_"), temp_("ig_unpack_tmp_") {}

  std::string Package(const std::vector<ZipWriterEntry>& entries) {
    const std::string path = packages_.path() + "/p" + std::to_string(++made_) + ".pt2";
    std::ofstream(path, std::ios::binary) << ZipOf(entries);
    return path;
  }
  std::set<std::string> TempEntries() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(temp_.path())) out.insert(e.path().filename().string());
    return out;
  }
  static AotiVariant Variant(const std::string& name, const std::string& source = "") {
    AotiVariant v;
    v.name = name;
    v.folder = "data/aotinductor/" + name + "/";
    v.device = "cpu";
    v.source.name = source;
    return v;
  }

  testing::ScratchDir packages_;
  testing::TmpdirOverride temp_;
  int made_ = 0;
};

TEST_F(UnpackedAotiVariantTest, UnpacksOnlyItsVariantUnderTmpdirAndRemovesItWhenGone) {
  const std::string package = Package({{"data/aotinductor/cpu/abc.so", "cpu library"},
                                       {"data/aotinductor/cpu/abc.cpp", "// source", true},
                                       {"data/aotinductor/cuda/def.so", "cuda library"},
                                       {"data/aotinductor/cuda/def.cubin", "kernels"}});
  absl::StatusOr<std::unique_ptr<UnpackedAotiVariant>> files = UnpackedAotiVariant::Unpack(package, Variant("cpu"));
  ASSERT_TRUE(files.ok()) << files.status();
  const std::string root = (*files)->root();
  EXPECT_EQ(fs::path(root).parent_path(), fs::path(temp_.path())) << root;
  EXPECT_EQ(fs::path(root).filename().string().rfind("infergate-aoti-", 0), 0u) << root;
  EXPECT_EQ((*files)->variant_folder(), root + "/data/aotinductor/cpu");
  EXPECT_EQ((*files)->library(), root + "/data/aotinductor/cpu/abc.so");
  EXPECT_EQ(*ReadFile((*files)->library()), "cpu library");
  EXPECT_EQ(*ReadFile(root + "/data/aotinductor/cpu/abc.cpp"), "// source");
  EXPECT_FALSE(fs::exists(root + "/data/aotinductor/cuda")) << "another variant's files were unpacked";
  files->reset();
  EXPECT_FALSE(fs::exists(root));
  EXPECT_TRUE(TempEntries().empty());
}

TEST_F(UnpackedAotiVariantTest, PicksTheLibraryNamedAfterTheSourceAmongSeveral) {
  const std::string package = Package({{"data/aotinductor/model/aaa.so", "other"},
                                       {"data/aotinductor/model/bbb.so", "the model's"},
                                       {"data/aotinductor/model/bbb.cpp", "// source"}});
  absl::StatusOr<std::unique_ptr<UnpackedAotiVariant>> files =
      UnpackedAotiVariant::Unpack(package, Variant("model", "data/aotinductor/model/bbb.cpp"));
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*ReadFile((*files)->library()), "the model's");
}

// Refusals name what is wrong, and leave nothing under TMPDIR.
TEST_F(UnpackedAotiVariantTest, RefusesAVariantWithoutOneLibraryToOpenAndLeavesNothing) {
  struct Case {
    std::vector<ZipWriterEntry> entries;
    AotiVariant variant;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{{"data/aotinductor/model/a.cpp", "// source"}}, Variant("model"), "unpacked no compiled library"},
      {{{"data/aotinductor/model/a.so", "1"}, {"data/aotinductor/model/b.so", "2"}},
       Variant("model", "data/aotinductor/model/c.cpp"),
       "holds 2 compiled libraries and none is named after its generated C++"},
      {{{"data/aotinductor/model/a.so", "x", false, 0100644, /*declared_size=*/-1, /*bad_crc=*/true}},
       Variant("model"),
       "fails its CRC-32 check"},
      {{{"data/aotinductor/model/../../evil.so", "x"}}, Variant("model"), "outside the archive's folder"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    absl::StatusOr<std::unique_ptr<UnpackedAotiVariant>> files =
        UnpackedAotiVariant::Unpack(Package(c.entries), c.variant);
    ASSERT_FALSE(files.ok());
    EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument) << files.status();
    EXPECT_NE(files.status().message().find(c.says), std::string::npos) << files.status();
    EXPECT_TRUE(TempEntries().empty());
  }
}

// A folder whose process is gone (no such pid, or the pid now belongs to a
// process that started later) is removed; a live process's folder, other
// names and a plain file are left alone.
TEST_F(UnpackedAotiVariantTest, RemovesOnlyTheFoldersOfProcessesThatAreGone) {
  const std::string package = Package({{"data/aotinductor/model/a.so", "library"}});
  absl::StatusOr<std::unique_ptr<UnpackedAotiVariant>> live = UnpackedAotiVariant::Unpack(package, Variant("model"));
  ASSERT_TRUE(live.ok()) << live.status();
  const std::string live_name = fs::path((*live)->root()).filename().string();
  // infergate-aoti-<pid>.<start>-XXXXXX: the same pid with another start
  // time is a process that is gone whose pid was reused.
  const std::string mark = live_name.substr(std::string("infergate-aoti-").size());
  const std::string pid = mark.substr(0, mark.find('.'));
  const std::string reused = "infergate-aoti-" + pid + ".1-aaaaaa";
  const std::string no_such_process = "infergate-aoti-2147483646.5-bbbbbb";
  for (const std::string& name : {reused, no_such_process, std::string("infergate-aoti-x.y-cccccc"),
                                  std::string("infergate-aoti-noid"), std::string("not-ours")}) {
    fs::create_directories(temp_.path() + "/" + name + "/data");
  }
  std::ofstream(temp_.path() + "/infergate-aoti-2147483645.5-file") << "a file, not a folder";

  std::vector<std::string> removed = RemoveUnpackedFoldersOfGoneProcesses(temp_.path());
  std::set<std::string> removed_names;
  for (const std::string& p : removed) removed_names.insert(fs::path(p).filename().string());
  EXPECT_EQ(removed_names, (std::set<std::string>{reused, no_such_process}));
  EXPECT_EQ(TempEntries(), (std::set<std::string>{live_name, "infergate-aoti-x.y-cccccc", "infergate-aoti-noid",
                                                  "not-ours", "infergate-aoti-2147483645.5-file"}));
  EXPECT_TRUE(fs::exists((*live)->library())) << "a live process's folder was touched";
}

// The first unpack of a process under a temp folder sweeps it.
TEST_F(UnpackedAotiVariantTest, TheFirstUnpackUnderATempFolderSweepsIt) {
  testing::TmpdirOverride fresh("ig_unpack_sweep_");
  const std::string stale = fresh.path() + "/infergate-aoti-2147483646.5-dddddd";
  fs::create_directories(stale + "/data/aotinductor/model");
  std::ofstream(stale + "/data/aotinductor/model/old.so") << "left by a killed server";
  absl::StatusOr<std::unique_ptr<UnpackedAotiVariant>> files =
      UnpackedAotiVariant::Unpack(Package({{"data/aotinductor/model/a.so", "library"}}), Variant("model"));
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists((*files)->library()));
}

}  // namespace
}  // namespace infergate
