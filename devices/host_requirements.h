#pragma once
// What the server needs from the operating system before LibTorch starts.
//
// LibTorch's CPU feature detection (cpuinfo) reads /proc/cpuinfo the first
// time a thread pool is sized; without it LibTorch throws from deep inside
// its start-up and the process dies with a C++ stack trace. In a container
// or chroot without /proc mounted that is the first thing a user sees, so
// the server checks these up front and says what is missing and how to fix
// it. Stateless; safe to call from any thread.

#include <string>

#include "absl/status/status.h"

namespace infergate {

// OK, or FAILED_PRECONDITION naming the missing file and the fix. `proc_root`
// is "/proc" in the server; tests point it at a scratch folder.
absl::Status CheckHostRequirements(const std::string& proc_root = "/proc");

}  // namespace infergate
