// The lifecycle's version decisions as one table: what is served and tried,
// what is on disk, the version policy, and the config's state.

#include "scheduler/repository/version_plan.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/common/text_proto.h"

namespace infergate {
namespace {

// A file by a small number: a different number is a different file.
FileStamp File(int id) {
  FileStamp stamp;
  stamp.size = 1000 + id;
  stamp.inode = id;
  return stamp;
}

// One version as published: "ready:A" serves file A; "ready:A tried:B
// failed" serves A after B was refused; "unavailable tried:B failed";
// "unavailable" (out of policy); "loading".
struct Known {
  int64_t version;
  VersionState state;
  int serves;  // 0: none
  int tried;   // 0: the file it serves
  bool failed;
};

struct PlanRow {
  const char* what;
  std::vector<Known> known;
  std::map<int64_t, int> on_disk;  // version -> file
  const char* policy;              // VersionPolicy text
  bool config_changed;
  bool config_broken;
  std::set<int64_t> failed_now;
  std::vector<int64_t> removed;
  const char* expected;  // "version:action" in plan order
};

std::string Plan(const PlanRow& row) {
  std::map<int64_t, VersionStatus> states;
  for (const Known& k : row.known) {
    VersionStatus& s = states[k.version];
    s.version = k.version;
    s.state = k.state;
    if (k.serves) s.stamp = File(k.serves);
    s.tried = File(k.tried ? k.tried : k.serves);
    s.failed = k.failed;
  }
  std::map<int64_t, FileStamp> on_disk;
  for (const auto& [v, file] : row.on_disk) on_disk[v] = File(file);
  VersionPlanInput input;
  input.states = &states;
  input.on_disk = &on_disk;
  input.policy = testing::FromText<v1::VersionPolicy>(row.policy);
  input.config_changed = row.config_changed;
  input.config_broken = row.config_broken;
  input.failed_now = row.failed_now;
  input.removed_from_disk = row.removed;
  std::vector<std::string> steps;
  for (const VersionStep& step : PlanVersions(input)) {
    steps.push_back(absl::StrCat(step.version, ":", VersionActionName(step.action)));
  }
  return absl::StrJoin(steps, " ");
}

TEST(VersionPlan, EveryDecisionInOneTable) {
  using S = VersionState;
  const char* latest = "";
  const char* latest2 = "latest { num_versions: 2 }";
  // clang-format off: a table, one row a line
  const PlanRow rows[] = {
      {"a new model: the latest loads, the rest is retired",
       {}, {{1, 1}, {2, 2}}, latest, false, false, {}, {}, "2:load 1:retire"},
      {"nothing changed: kept, and the retired stay retired",
       {{1, S::kUnavailable, 0, 1, false}, {2, S::kReady, 2, 0, false}}, {{1, 1}, {2, 2}}, latest, false, false, {}, {},
       "1:retire 2:keep"},
      {"a served version's file changed: replaced beside the old copy",
       {{2, S::kReady, 2, 0, false}}, {{2, 3}}, latest, false, false, {}, {}, "2:replace"},
      {"the config changed: every served version is loaded again",
       {{1, S::kReady, 1, 0, false}, {2, S::kReady, 2, 0, false}}, {{1, 1}, {2, 2}}, latest2, true, false, {}, {},
       "2:replace 1:replace"},
      {"a newer version that failed is not tried again, and latest reaches past it",
       {{2, S::kReady, 2, 0, false}, {3, S::kUnavailable, 0, 3, true}}, {{2, 2}, {3, 3}}, latest, false, false, {}, {},
       "2:keep 3:keep"},
      {"the failed file was replaced: it is tried, and the older one retired",
       {{2, S::kReady, 2, 0, false}, {3, S::kUnavailable, 0, 3, true}}, {{2, 2}, {3, 4}}, latest, false, false, {}, {},
       "3:load 2:retire"},
      {"a new config tries the failed file again",
       {{2, S::kReady, 2, 0, false}, {3, S::kUnavailable, 0, 3, true}}, {{2, 2}, {3, 3}}, latest, true, false, {}, {},
       "3:load 2:retire"},
      {"a load that failed in this update: the plan reaches the next older version",
       {{3, S::kUnavailable, 0, 3, true}}, {{2, 2}, {3, 3}}, latest, true, false, {3}, {}, "2:load 3:keep"},
      {"latest 2 with the newest failed now: the two below it load",
       {{3, S::kUnavailable, 0, 3, true}}, {{1, 1}, {2, 2}, {3, 3}}, latest2, false, false, {3}, {},
       "2:load 1:load 3:keep"},
      {"a refused update of a served version: it keeps answering on its old file",
       {{2, S::kReady, 2, 3, true}}, {{2, 3}}, latest, false, false, {}, {}, "2:keep"},
      {"a refused update, written again: tried again",
       {{2, S::kReady, 2, 3, true}}, {{2, 4}}, latest, false, false, {}, {}, "2:replace"},
      {"a broken config: every file on disk is refused",
       {{1, S::kReady, 1, 0, false}}, {{1, 1}, {2, 2}}, latest, false, true, {}, {}, "1:refuse 2:refuse"},
      {"a version removed from disk unloads; one never known is ignored",
       {{1, S::kReady, 1, 0, false}, {2, S::kReady, 2, 0, false}}, {{2, 2}}, latest2, false, false, {}, {1, 4},
       "1:unload 2:keep"},
      {"all versions: newest first",
       {}, {{1, 1}, {2, 2}, {3, 3}}, "all {}", false, false, {}, {}, "3:load 2:load 1:load"},
      {"specific versions: the one left out is retired from service",
       {{2, S::kReady, 2, 0, false}}, {{1, 1}, {2, 2}, {3, 3}}, "specific { versions: [1, 3] }", false, false, {}, {},
       "3:load 1:load 2:retire"},
      {"a version still loading (an update cut short) is loaded",
       {{1, S::kLoading, 0, 1, false}}, {{1, 1}}, latest, false, false, {}, {}, "1:load"},
      {"no files: nothing to do", {}, {}, latest, false, false, {}, {}, ""},
  };
  // clang-format on
  for (const PlanRow& row : rows) {
    SCOPED_TRACE(row.what);
    EXPECT_EQ(Plan(row), row.expected);
  }
}

TEST(VersionPlan, PlanningAgainAfterTheLoadsKeepsThem) {
  // What the lifecycle does between rounds: the loads of the first plan
  // done, the second plan has nothing left to load.
  std::map<int64_t, VersionStatus> states;
  std::map<int64_t, FileStamp> on_disk = {{1, File(1)}, {2, File(2)}, {3, File(3)}};
  VersionPlanInput input;
  input.states = &states;
  input.on_disk = &on_disk;
  input.policy = testing::FromText<v1::VersionPolicy>("latest { num_versions: 2 }");
  for (const VersionStep& step : PlanVersions(input)) {
    if (step.action != VersionAction::kLoad) continue;
    VersionStatus& s = states[step.version];
    s.version = step.version;
    s.state = VersionState::kReady;
    s.stamp = s.tried = on_disk.at(step.version);
  }
  for (const VersionStep& step : PlanVersions(input)) {
    EXPECT_NE(step.action, VersionAction::kLoad) << step.version;
    EXPECT_NE(step.action, VersionAction::kReplace) << step.version;
  }
}

}  // namespace
}  // namespace infergate
