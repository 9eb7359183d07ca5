#include "scheduler/repository/version_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace infergate {

std::vector<int64_t> SelectVersions(const v1::VersionPolicy& policy, const std::vector<int64_t>& loadable) {
  switch (policy.policy_choice_case()) {
    case v1::VersionPolicy::kAll: return loadable;
    case v1::VersionPolicy::kSpecific: {
      std::vector<int64_t> out;
      for (int64_t v : loadable) {
        const auto& wanted = policy.specific().versions();
        if (std::find(wanted.begin(), wanted.end(), v) != wanted.end()) out.push_back(v);
      }
      return out;
    }
    case v1::VersionPolicy::kLatest:
    case v1::VersionPolicy::POLICY_CHOICE_NOT_SET: break;
  }
  size_t n = policy.has_latest() ? std::max<uint32_t>(policy.latest().num_versions(), 1) : 1;
  n = std::min(n, loadable.size());
  return std::vector<int64_t>(loadable.end() - static_cast<std::ptrdiff_t>(n), loadable.end());
}

std::string DescribePolicy(const v1::VersionPolicy& policy) {
  switch (policy.policy_choice_case()) {
    case v1::VersionPolicy::kAll: return "all versions";
    case v1::VersionPolicy::kSpecific:
      return absl::StrCat("version", policy.specific().versions_size() == 1 ? " " : "s ",
                          absl::StrJoin(policy.specific().versions(), ", "));
    default: break;
  }
  uint32_t n = policy.has_latest() ? std::max<uint32_t>(policy.latest().num_versions(), 1) : 1;
  return n == 1 ? "the latest version" : absl::StrCat("the latest ", n, " versions");
}

absl::Status ValidateVersionPolicy(const v1::VersionPolicy& policy) {
  if (policy.has_latest() && policy.latest().num_versions() == 0) {
    return absl::InvalidArgumentError("version_policy.latest.num_versions: must be at least 1");
  }
  if (policy.has_specific()) {
    if (policy.specific().versions_size() == 0) {
      return absl::InvalidArgumentError("version_policy.specific.versions: lists no version");
    }
    for (int i = 0; i < policy.specific().versions_size(); ++i) {
      if (policy.specific().versions(i) < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("version_policy.specific.versions[", i, "]: ", policy.specific().versions(i), " is negative"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace infergate
