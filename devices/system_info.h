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
// The CPU's architecture and the vector extensions that decide which
// kernels LibTorch and oneDNN pick for 16-bit and 32-bit floating point,
// e.g. "x86_64+avx2+avx512f+avx512_bf16": two hosts with equal strings run
// the same CPU kernels. Results of accuracy checks are keyed by it.
std::string CpuInstructionSet();
// The same from /proc/cpuinfo text; exposed for tests.
std::string CpuInstructionSetFrom(const std::string& cpuinfo, const std::string& machine);
// From /proc/meminfo; inside a container with a memory limit (cgroup v2 or
// v1), the limit and the container's usage instead.
HostMemory ReadHostMemory();
// The memory limit of the cgroup at `cgroup_root`, or 0 when it has none.
uint64_t ContainerMemoryLimit(const std::string& cgroup_root = "/sys/fs/cgroup");

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
