#pragma once
// How the server's inference calls ended since it started, by status code:
// what the server itself says it answered, whatever the front end, and how
// many of them it refused because it was draining. The server logs it when
// a drain ends ("answered 128 inference calls: OK 120, UNAVAILABLE 8; 8
// refused while draining"), so whoever stops it can check that every call
// it answered reached its client (the drain tests compare it with what
// their clients got; the benchmark with what its load tool saw).
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
  // A call that ended with `status` (each call once); a drain refusal
  // (IsDrainRefusal, wherever it was made) is also counted as one.
  void Count(const absl::Status& status);
  uint64_t Of(absl::StatusCode code) const;
  uint64_t Total() const;
  uint64_t drain_refusals() const;
  // "answered 128 inference calls: OK 120, UNAVAILABLE 8; 8 refused while
  // draining": codes with no call left out, and the last part only when
  // there were drain refusals.
  std::string Summary() const;

 private:
  static constexpr size_t kCodes = 17;  // absl::StatusCode's 0..16
  // Its slot; a code outside 0..16 counts as UNKNOWN.
  static size_t IndexOf(absl::StatusCode code);
  std::array<std::atomic<uint64_t>, kCodes> counts_{};
  std::atomic<uint64_t> drain_refusals_{0};
};

}  // namespace infergate
