#pragma once
// Parsing of the human-friendly sizes and durations that flags and configs
// accept. Errors are INVALID_ARGUMENT and quote the text.

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

// "2GiB", "512MiB", "1.5GB", "8k", "1048576": a byte count.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// "1.50 GiB", "12.00 MiB", "7.81 KiB", "640 bytes": a byte count for people to read.
std::string FormatBytes(uint64_t bytes);

// "30s", "1500ms", "2m", "45" (seconds); at most one day. `flag` names the
// field at fault in the error.
absl::StatusOr<std::chrono::milliseconds> ParseDuration(absl::string_view text, absl::string_view flag);

}  // namespace infergate
