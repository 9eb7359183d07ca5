#pragma once
// Model names are folder names inside the repository; this keeps them there.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace infergate {

inline constexpr size_t kMaxModelNameLength = 128;

// OK for 1..128 characters of [A-Za-z0-9_.-] that do not start with '.'
// (so no "..", no hidden folders, no separators, no absolute paths).
// Otherwise INVALID_ARGUMENT naming `field`.
absl::Status ValidateModelName(absl::string_view name, absl::string_view field = "model");

}  // namespace infergate
