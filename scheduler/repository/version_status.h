#pragma once
// Where one version of a model stands in its lifecycle, as the repository
// view publishes it. Plain data, free of LibTorch.

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "scheduler/repository/file_stamp.h"

namespace infergate {

enum class VersionState { kLoading, kReady, kUnavailable, kUnloading };
// "LOADING", "READY", "UNAVAILABLE", "UNLOADING".
absl::string_view VersionStateName(VersionState state);

struct VersionStatus {
  int64_t version = 0;
  VersionState state = VersionState::kUnavailable;
  // Why it is not served; for a READY version, why a newer file on disk is
  // not the one answering (a broken update).
  std::string reason;
  // Which load of this version answers: a new number for every accepted
  // model.pt or config.pbtxt, so old and new copies are cached apart.
  uint64_t generation = 0;
  FileStamp stamp;             // the model.pt that answers (READY)
  FileStamp tried;             // the newest model.pt tried; a failed one is not retried until it changes
  bool failed = false;         // the file in `tried` failed to load
  bool out_of_policy = false;  // UNAVAILABLE because version_policy leaves it out
};

}  // namespace infergate
