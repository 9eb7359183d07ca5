#include "scheduler/repository/repository_diff.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

FileStamp Stamp(uint64_t size, int64_t mtime = 1, uint64_t inode = 7) { return {size, mtime, inode}; }

DiskModel Model(const std::string& name, FileStamp config, std::map<int64_t, FileStamp> versions) {
  return {name, config, std::move(versions)};
}

const ModelDiff* For(const std::vector<ModelDiff>& diffs, const std::string& model) {
  for (const ModelDiff& d : diffs) {
    if (d.model == model) return &d;
  }
  return nullptr;
}

TEST(RepositoryDiff, NothingChangedNothingReported) {
  DiskRepository repo = {{"a", Model("a", Stamp(10), {{1, Stamp(100)}})}};
  EXPECT_TRUE(DiffRepository(repo, repo).empty());
  EXPECT_TRUE(DiffRepository(repo, repo, &repo).empty());
}

TEST(RepositoryDiff, EveryKindOfChange) {
  DiskRepository known = {
      {"same", Model("same", Stamp(10), {{1, Stamp(100)}})},
      {"gone", Model("gone", Stamp(10), {{1, Stamp(100)}})},
      {"cfg", Model("cfg", Stamp(10), {{1, Stamp(100)}})},
      {"vers", Model("vers", {}, {{1, Stamp(100)}, {2, Stamp(200)}, {3, Stamp(300)}})},
  };
  DiskRepository now = {
      {"same", Model("same", Stamp(10), {{1, Stamp(100)}})},
      {"new", Model("new", {}, {{4, Stamp(1)}})},
      {"cfg", Model("cfg", Stamp(10, 2), {{1, Stamp(100)}})},  // rewritten in place: new mtime
      // 1 replaced by a rename (new inode), 2 untouched, 3 removed, 5 added
      {"vers", Model("vers", {}, {{1, Stamp(100, 1, 8)}, {2, Stamp(200)}, {5, Stamp(500)}})},
  };
  std::vector<ModelDiff> diffs = DiffRepository(known, now);
  EXPECT_EQ(diffs.size(), 4u);
  EXPECT_EQ(For(diffs, "same"), nullptr);
  ASSERT_NE(For(diffs, "new"), nullptr);
  EXPECT_TRUE(For(diffs, "new")->added);
  EXPECT_EQ(For(diffs, "new")->versions_added, (std::vector<int64_t>{4}));
  ASSERT_NE(For(diffs, "gone"), nullptr);
  EXPECT_TRUE(For(diffs, "gone")->removed);
  EXPECT_EQ(For(diffs, "gone")->versions_removed, (std::vector<int64_t>{1}));
  ASSERT_NE(For(diffs, "cfg"), nullptr);
  EXPECT_TRUE(For(diffs, "cfg")->config_changed);
  EXPECT_TRUE(For(diffs, "cfg")->versions_changed.empty());
  const ModelDiff* vers = For(diffs, "vers");
  ASSERT_NE(vers, nullptr);
  EXPECT_FALSE(vers->config_changed);
  EXPECT_EQ(vers->versions_added, (std::vector<int64_t>{5}));
  EXPECT_EQ(vers->versions_changed, (std::vector<int64_t>{1}));
  EXPECT_EQ(vers->versions_removed, (std::vector<int64_t>{3}));
  EXPECT_EQ(vers->ToString(), "vers: version 5 added, version 1 changed, version 3 removed");
}

// A config.pbtxt that appears or disappears is a config change too.
TEST(RepositoryDiff, ConfigAddedOrDeleted) {
  DiskRepository without = {{"a", Model("a", {}, {{1, Stamp(100)}})}};
  DiskRepository with = {{"a", Model("a", Stamp(10), {{1, Stamp(100)}})}};
  ASSERT_EQ(DiffRepository(without, with).size(), 1u);
  EXPECT_TRUE(DiffRepository(without, with)[0].config_changed);
  EXPECT_TRUE(DiffRepository(with, without)[0].config_changed);
}

// A file still changing between the last two scans is left alone until it
// holds still for one interval; removals wait one interval too.
TEST(RepositoryDiff, ChangesWaitUntilTheyHoldStill) {
  DiskRepository known = {{"a", Model("a", {}, {{1, Stamp(100)}})}, {"b", Model("b", {}, {{1, Stamp(1)}})}};
  DiskRepository previous = {{"a", Model("a", {}, {{1, Stamp(100)}, {2, Stamp(50, 5)}})},
                             {"b", Model("b", {}, {{1, Stamp(1)}})}};
  DiskRepository growing = {{"a", Model("a", {}, {{1, Stamp(100)}, {2, Stamp(80, 6)}})}};
  // version 2 grew between the scans and b just vanished: nothing yet
  EXPECT_TRUE(DiffRepository(known, growing, &previous).empty());
  // the next scan sees the same files: both act
  std::vector<ModelDiff> settled = DiffRepository(known, growing, &growing);
  ASSERT_EQ(settled.size(), 2u);
  EXPECT_EQ(For(settled, "a")->versions_added, (std::vector<int64_t>{2}));
  EXPECT_TRUE(For(settled, "b")->removed);
}

}  // namespace
}  // namespace infergate
