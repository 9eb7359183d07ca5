#pragma once
// NVIDIA's management library, loaded at run time with dlopen so that one
// binary runs with and without GPUs and the build needs no CUDA toolkit.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace infergate {

struct NvmlDevice {
  std::string name;
  uint64_t memory_total_bytes = 0;
  uint64_t memory_used_bytes = 0;
  int cc_major = 0;  // compute capability
  int cc_minor = 0;
};

// Reads every device `library` (default: the driver's libnvidia-ml.so.1)
// reports, in NVML index order. NOT_FOUND when the library is absent;
// UNAVAILABLE when it is present but cannot initialise (no driver). The
// library is opened and initialised on the first call for its path and
// kept for the process's lifetime (nvmlInit costs milliseconds, and every
// ListDevices and metrics scrape reads the devices); later calls read
// only, and a first call's failure is the answer from then on. Thread-safe.
absl::StatusOr<std::vector<NvmlDevice>> ReadNvmlDevices(const std::string& library = "libnvidia-ml.so.1");

}  // namespace infergate
