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

// Parses /proc/meminfo text; exposed for tests.
HostMemory ParseMeminfo(const std::string& text);

}  // namespace infergate
