#pragma once
// Whole-file reads and crash-safe whole-file writes, for the few files the
// server and its tools read or keep (configs, tokens, certificates, state).

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

// The whole file. NOT_FOUND when it cannot be opened, FAILED_PRECONDITION
// when it is not a regular file (a FIFO would block the reader forever),
// INTERNAL when a read fails; each names `what` (e.g. "--tls-cert") and the
// path. Symbolic links are followed.
absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view what = "file");

// Writes `contents` to `path` so that a crash leaves either the old or the
// new file, never a torn one: temp file in the same folder, fsync, rename.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace infergate
