#pragma once
// What one model's versions need after its files or config changed: which
// to load, keep, retire and unload. The lifecycle's decision as a pure
// function of the versions' states, the files on disk and the version
// policy; ModelLifecycle (model_lifecycle.h) only carries the plan out.
//
//   config.pbtxt broken       every version on disk: refused (nothing serves)
//   wanted by version_policy  not served: load; served from an older file or
//                             under a changed config: replace; else keep
//   a file that failed        not tried again until it or the config changes;
//                             "latest N" reaches past it to older versions
//   not wanted                retire (UNAVAILABLE, copies dropped), but a
//                             failed file keeps its failure as the reason
//   removed from disk         unload (UNLOADING for one poll)
//
// A load that fails changes what "latest N" wants: the lifecycle adds the
// version to `failed_now` and plans again. Planning is idempotent, so what
// loaded in an earlier round is kept in the next.
//
// Pure functions; thread-safe.

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/string_view.h"
#include "infergate/v1/model_config.pb.h"
#include "scheduler/repository/file_stamp.h"
#include "scheduler/repository/version_status.h"

namespace infergate {

enum class VersionAction {
  kLoad,     // not served: load its file, then publish it READY
  kReplace,  // served, but its file or the config changed: load the new copy beside the one answering
  kKeep,     // nothing to do: served as it is, or its file failed and has not changed since
  kRetire,   // left out by the version policy: UNAVAILABLE, its copies dropped
  kRefuse,   // the config is broken: UNAVAILABLE, its copies dropped
  kUnload,   // removed from disk: UNLOADING, its copies dropped
};
// "load", "replace", "keep", "retire", "refuse", "unload".
absl::string_view VersionActionName(VersionAction action);

struct VersionStep {
  int64_t version = 0;
  VersionAction action = VersionAction::kKeep;
  friend bool operator==(const VersionStep&, const VersionStep&) = default;
};

struct VersionPlanInput {
  const std::map<int64_t, VersionStatus>* states = nullptr;  // the versions as published now, by number
  const std::map<int64_t, FileStamp>* on_disk = nullptr;     // the version files the repository holds now
  v1::VersionPolicy policy;
  bool config_changed = false;             // a new config applies: every file is tried again
  bool config_broken = false;              // no usable config: nothing is served
  std::set<int64_t> failed_now;            // versions whose load failed earlier in this update
  std::vector<int64_t> removed_from_disk;  // versions whose files went since the last update
};

// One step per version concerned: loads and replacements first, newest
// first (the order they are tried in); then the rest, ascending. Versions
// neither on disk nor removed from it are left out.
std::vector<VersionStep> PlanVersions(const VersionPlanInput& input);

}  // namespace infergate
