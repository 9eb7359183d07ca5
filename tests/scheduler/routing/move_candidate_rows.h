#pragma once
// A MoveCandidate in the units the move policy's and the tail set's tables
// read (requests a second, milliseconds, MiB), built in one place so a row
// of either table means the same. Test-only; header-only.

#include <cstdint>
#include <string>

#include "scheduler/routing/move_policy.h"

namespace infergate {

inline constexpr uint64_t kCandidateMiB = uint64_t{1} << 20;

// `name`, asked for `rps` times a second, computing in `gpu_ms` on the
// accelerator and `cpu_ms` on its copy elsewhere, with `mib` MiB of
// weights; not resident, nothing else set.
inline MoveCandidate CandidateRow(const std::string& name, double rps, double gpu_ms, double cpu_ms, uint64_t mib) {
  MoveCandidate m;
  m.model = name;
  m.demand_per_second = rps;
  m.accelerator_us = gpu_ms * 1000;
  m.elsewhere_us = cpu_ms * 1000;
  m.bytes = mib * kCandidateMiB;
  return m;
}

}  // namespace infergate
