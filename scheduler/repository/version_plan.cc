#include "scheduler/repository/version_plan.h"

#include <algorithm>

#include "scheduler/repository/version_policy.h"

namespace infergate {

absl::string_view VersionActionName(VersionAction action) {
  switch (action) {
    case VersionAction::kLoad: return "load";
    case VersionAction::kReplace: return "replace";
    case VersionAction::kKeep: return "keep";
    case VersionAction::kRetire: return "retire";
    case VersionAction::kRefuse: return "refuse";
    case VersionAction::kUnload: return "unload";
  }
  return "unknown";
}

std::vector<VersionStep> PlanVersions(const VersionPlanInput& input) {
  const std::map<int64_t, VersionStatus>& states = *input.states;
  const std::map<int64_t, FileStamp>& on_disk = *input.on_disk;
  auto status_of = [&](int64_t v) -> const VersionStatus* {
    auto it = states.find(v);
    return it == states.end() ? nullptr : &it->second;
  };
  // A file that failed to load is not tried again until it, or the config, changes.
  auto refused = [&](const VersionStatus* s, const FileStamp& stamp) {
    return s && s->failed && s->tried == stamp && !input.config_changed;
  };

  std::vector<VersionStep> loads, rest;
  if (input.config_broken) {
    for (const auto& [v, stamp] : on_disk) rest.push_back({v, VersionAction::kRefuse});
  } else {
    std::vector<int64_t> loadable;
    for (const auto& [v, stamp] : on_disk) {
      const VersionStatus* s = status_of(v);
      const bool broken = s && s->state != VersionState::kReady && refused(s, stamp);
      if (!broken && !input.failed_now.count(v)) loadable.push_back(v);
    }
    const std::vector<int64_t> wanted = SelectVersions(input.policy, loadable);
    for (auto it = wanted.rbegin(); it != wanted.rend(); ++it) {
      const FileStamp& stamp = on_disk.at(*it);
      const VersionStatus* s = status_of(*it);
      const bool serving = s && s->state == VersionState::kReady;
      if (refused(s, stamp) || (serving && s->stamp == stamp && !input.config_changed)) {
        rest.push_back({*it, VersionAction::kKeep});
      } else {
        loads.push_back({*it, serving ? VersionAction::kReplace : VersionAction::kLoad});
      }
    }
    for (const auto& [v, stamp] : on_disk) {
      if (std::binary_search(wanted.begin(), wanted.end(), v)) continue;
      const VersionStatus* s = status_of(v);
      const bool keeps_failure = s && s->state == VersionState::kUnavailable && s->failed && s->tried == stamp;
      rest.push_back({v, keeps_failure ? VersionAction::kKeep : VersionAction::kRetire});
    }
  }
  for (int64_t v : input.removed_from_disk) {
    if (status_of(v) && !on_disk.count(v)) rest.push_back({v, VersionAction::kUnload});
  }
  std::stable_sort(rest.begin(), rest.end(),
                   [](const VersionStep& a, const VersionStep& b) { return a.version < b.version; });
  loads.insert(loads.end(), rest.begin(), rest.end());
  return loads;
}

}  // namespace infergate
