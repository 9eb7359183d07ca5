#pragma once
// The last line of defence: no exception may end the process. Every entry
// point that runs work for a client (an HTTP or gRPC handler, a worker, a
// pool's task) wraps it in RunCatching, which turns whatever escapes into
// an INTERNAL status naming where it happened and what was thrown
// (std::bad_alloc included), logs it, and counts it, so the caller can
// answer the client and go on serving.
//
// Threading: any thread; the count is atomic.

#include <cstdint>
#include <exception>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace infergate {

// The exception being handled (call inside a catch block) as INTERNAL
// naming `where`; logged and counted.
absl::Status StatusOfCaughtException(absl::string_view where);

// Exceptions caught by RunCatching and StatusOfCaughtException since start.
uint64_t CaughtExceptionCount();

// Runs `fn` (returning void or absl::Status); an exception it throws
// becomes StatusOfCaughtException(where).
template <typename Fn>
absl::Status RunCatching(absl::string_view where, Fn&& fn) noexcept {
  try {
    if constexpr (std::is_void_v<decltype(fn())>) {
      fn();
      return absl::OkStatus();
    } else {
      return fn();
    }
  } catch (...) {
    return StatusOfCaughtException(where);
  }
}

}  // namespace infergate
