#pragma once
// Unpacks a zip archive that came from somewhere else (a TorchServe .mar)
// into a folder of its own, safely:
//   - every entry's name must stay inside the folder: no absolute path, no
//     ".." part, no backslash or NUL, nothing over kMaxZipNameBytes;
//   - no symbolic link is made, and none is followed: an entry the archive
//     marks as a link is refused, and files are created with O_EXCL and
//     O_NOFOLLOW, so an entry named twice is refused too;
//   - what entries inflate to is counted as it is written, against a total
//     (an archive's declared sizes may lie), and each entry must inflate to
//     exactly its declared size with its declared CRC-32;
//   - only stored and deflated, unencrypted entries, whose local headers
//     name them as the central directory does, and no two of which share
//     bytes (overlapping entries inflate the same data many times);
// On any refusal the folder is emptied again: nothing of a refused archive
// stays on disk. Pure function over the file system; thread-safe for
// distinct destinations.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

inline constexpr size_t kMaxZipNameBytes = 1024;

struct ZipExtractLimits {
  // The most every entry together may inflate to.
  uint64_t max_total_bytes = uint64_t{16} << 30;
};

// Extracts the archive at `path` into `dest`, an existing empty folder
// that only this process writes to; with `only_under` set (a folder's name
// ending in '/'), only the entries below it, at their full names. Returns
// the bytes written. INVALID_ARGUMENT naming the entry for an unsafe or
// damaged one; RESOURCE_EXHAUSTED when the archive inflates past the limit.
absl::StatusOr<uint64_t> ExtractZip(const std::string& path, const std::string& dest, const ZipExtractLimits& limits,
                                    absl::string_view only_under = "");

// Whether `name` (an entry's name) may be written below a folder: relative,
// without "." or ".." parts, backslashes or NUL. A trailing '/' (a folder
// entry) is allowed.
bool IsSafeZipEntryName(const std::string& name);

}  // namespace infergate
