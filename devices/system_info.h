#pragma once
// Host facts read from the OS: CPU model name, logical cores, memory.

#include <cstdint>
#include <string>

namespace infergate {

struct HostMemory {
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;  // total - available, as `free` reports it
};

std::string CpuModelName();  // from /proc/cpuinfo; "unknown CPU" if absent
unsigned LogicalCores();     // CPUs this process may run on
HostMemory ReadHostMemory();  // from /proc/meminfo; cgroup limits are not applied

// Sets the thread count of the BLAS library LibTorch calls for matrix
// products, when that library is OpenBLAS or BLIS/MKL-style with a run-time
// setter (looked up with dlsym, so any BLAS links). OpenBLAS otherwise runs
// every product on all cores and serialises concurrent callers, which turns
// several model workers into one. Returns the setter's name, or "" when the
// BLAS has none (the reference BLAS is single-threaded anyway).
std::string SetBlasThreads(int threads);

// Parses /proc/meminfo text; exposed for tests.
HostMemory ParseMeminfo(const std::string& text);

}  // namespace infergate
