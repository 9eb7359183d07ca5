#pragma once
// Work folders under the system's temporary folder that name the process
// that made them: "<prefix><pid>.<start ticks>-XXXXXX". A process that dies
// without removing its folders (a crash, a kill, an out-of-memory kill)
// leaves them behind; the next process to make a folder with the same
// prefix in the same place removes every such folder whose process is gone
// (the pid is not running, or is running but started at another time: a
// restarted container's server is often pid 1 again). The .pt2 unpacking,
// the TorchServe model store and the uploads' folders are made this way.
//
// Threading: thread-safe; the sweep runs once per (folder, prefix) per
// process.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

// The temporary folder: $TMPDIR, else /tmp.
std::string TemporaryFolder();

// Makes a new folder (mode 0700) "<parent>/<prefix><mark>-XXXXXX" and
// returns its path; first, once per process for this parent and prefix,
// removes the folders of gone processes. `parent` empty: TemporaryFolder().
// UNAVAILABLE when it cannot be made.
absl::StatusOr<std::string> MakeOwnedTempFolder(absl::string_view prefix, const std::string& parent = "");

// Removes the folders named "<prefix><pid>.<start ticks>-*" directly under
// `parent` whose process is gone; returns their paths. Folders of a mark
// without a start time, links and other entries are left alone.
std::vector<std::string> RemoveFoldersOfGoneProcesses(const std::string& parent, absl::string_view prefix);

// This process's mark: "<pid>.<start ticks>", or "<pid>" when /proc cannot
// tell its start (then no sweep takes a folder for a gone process's).
const std::string& ProcessOwnerMark();

}  // namespace infergate
