#pragma once
// The answer to an inference call refused because the server is draining,
// wherever the refusal happens: a front end's admission, the core's own
// admission (a call admitted in the instant the drain began), or the queue
// cut when the drain timeout passes. The status carries a mark, so whoever
// counts how calls ended (CallTally) counts every drain refusal as one,
// without knowing where it was made.
//
// Pure functions; any thread.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace infergate {

// UNAVAILABLE with `message` (what the client is told: why, and that
// another replica may take the call), marked as a drain refusal.
absl::Status DrainRefusal(absl::string_view message);

// The refusal of a call that arrives while the server drains (the front
// ends' admission and the core's give the same answer).
absl::Status DrainingRefusal();

// Whether `status` was made by DrainRefusal.
bool IsDrainRefusal(const absl::Status& status);

}  // namespace infergate
