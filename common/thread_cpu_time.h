#pragma once
// The calling thread's CPU time: what a computation cost the core it ran
// on, without the time other threads took that core away (wall time
// counts that too). Thread-safe; each thread reads its own clock.

#include <cstdint>

namespace infergate {

// Microseconds of CPU the calling thread has used since it started.
uint64_t ThreadCpuMicros();

}  // namespace infergate
