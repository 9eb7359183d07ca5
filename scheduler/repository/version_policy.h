#pragma once
// Which versions of a model are served, from the version_policy of its
// config.pbtxt (Triton's semantics): the latest N, all, or specific ones.
// Pure functions; thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "infergate/v1/model_config.pb.h"

namespace infergate {

// The versions to serve out of `loadable` (ascending; versions known to be
// broken are left out by the caller, so "latest" skips over them).
std::vector<int64_t> SelectVersions(const v1::VersionPolicy& policy, const std::vector<int64_t>& loadable);

// The policy in words, for messages: "the latest 2 versions", "all versions",
// "versions 1, 3".
std::string DescribePolicy(const v1::VersionPolicy& policy);

// config.pbtxt checks: a latest policy serves at least one version; a
// specific policy lists at least one, none negative.
absl::Status ValidateVersionPolicy(const v1::VersionPolicy& policy);

}  // namespace infergate
