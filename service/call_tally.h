#pragma once
// How the server's inference calls ended since it started, by status code:
// what the server itself says it answered, whatever the front end. The
// server logs it when a drain ends ("answered 128 inference calls: OK 120,
// UNAVAILABLE 8"), so whoever stops it can check that every call it
// answered reached its client (the drain tests compare it with what their
// clients got).
//
// Threading: Count may be called from any thread; Summary reads each count
// once, exact when no call is running.

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace infergate {

class CallTally {
 public:
  void Count(absl::StatusCode code);
  uint64_t Of(absl::StatusCode code) const;
  uint64_t Total() const;
  // "answered 128 inference calls: OK 120, UNAVAILABLE 8", codes with no
  // call left out.
  std::string Summary() const;

 private:
  static constexpr size_t kCodes = 17;  // absl::StatusCode's 0..16
  std::array<std::atomic<uint64_t>, kCodes> counts_{};
};

}  // namespace infergate
