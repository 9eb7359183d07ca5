#pragma once
// Names the calling thread, as `top -H`, `ps -L`, `perf` and debuggers show
// it: Linux keeps 15 bytes of a thread's name, so a longer one is cut.
// Threading: names only the calling thread; call it first thing in a
// thread's body.

#include <string>

#include "absl/strings/string_view.h"

namespace infergate {

inline constexpr size_t kMaxThreadNameBytes = 15;

void NameThisThread(absl::string_view name);

// The calling thread's name ("" where it cannot be read).
std::string ThisThreadName();

}  // namespace infergate
