#include "devices/system_info.h"

#include <dlfcn.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#if defined(__linux__)
#include <sched.h>
#elif defined(__APPLE__)
#include <mach/mach.h>
#include <sys/sysctl.h>
#endif

#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace infergate {
namespace {
std::string ReadFile(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
#if defined(__APPLE__)
// A sysctl string or number; empty / 0 when the name is unknown.
std::string SysctlString(const char* name) {
  char buf[256];
  size_t len = sizeof(buf);
  if (sysctlbyname(name, buf, &len, nullptr, 0) != 0 || len == 0) return "";
  return std::string(buf, strnlen(buf, len));
}
uint64_t SysctlNumber(const char* name) {
  uint64_t value = 0;
  size_t len = sizeof(value);
  if (sysctlbyname(name, &value, &len, nullptr, 0) != 0) return 0;
  return len == sizeof(uint32_t) ? static_cast<uint32_t>(value) : value;
}
#endif

}  // namespace

// Linux reads /proc; macOS (where the CPU and MPS share one memory) asks
// sysctl and the Mach VM statistics. The macOS branches have never run in
// this project's CI (it has no macOS machine).
std::string CpuModelName() {
#if defined(__APPLE__)
  std::string brand = SysctlString("machdep.cpu.brand_string");
  return brand.empty() ? "unknown CPU" : brand;
#endif
  std::string text = ReadFile("/proc/cpuinfo");
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    // x86 says "model name", some ARM kernels "Model" or "Hardware".
    if (absl::StartsWith(line, "model name") || absl::StartsWith(line, "Model") || absl::StartsWith(line, "Hardware")) {
      auto colon = line.find(':');
      if (colon != absl::string_view::npos) {
        std::string name(absl::StripAsciiWhitespace(line.substr(colon + 1)));
        if (!name.empty()) return name;
      }
    }
  }
  return "unknown CPU";
}

std::string CpuInstructionSetFrom(const std::string& cpuinfo, const std::string& machine) {
  // The extensions LibTorch's CPU capability and oneDNN's ISA dispatch on
  // for floating point (x86 "flags", ARM "Features").
  static constexpr const char* kRelevant[] = {"avx",      "avx2",     "fma",         "f16c",        "avx512f",
                                              "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                                              "amx_tile", "amx_bf16", "amx_fp16",    "asimd",       "asimdhp",
                                              "fphp",     "bf16",     "sve",         "sve2",        "i8mm"};
  std::string out = machine.empty() ? "unknown" : machine;
  for (absl::string_view line : absl::StrSplit(cpuinfo, '\n')) {
    if (!absl::StartsWith(line, "flags") && !absl::StartsWith(line, "Features")) continue;
    auto colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    std::vector<absl::string_view> present = absl::StrSplit(line.substr(colon + 1), ' ', absl::SkipEmpty());
    for (const char* flag : kRelevant) {
      if (std::find(present.begin(), present.end(), flag) != present.end()) out += std::string("+") + flag;
    }
    break;  // every core of one host has the same flags
  }
  return out;
}

std::string CpuInstructionSet() {
  struct utsname name{};
  std::string machine = uname(&name) == 0 ? name.machine : "";
#if defined(__APPLE__)
  std::string isa = machine;
  if (SysctlNumber("hw.optional.arm.FEAT_BF16")) isa += "+bf16";
  if (SysctlNumber("hw.optional.arm.FEAT_FP16")) isa += "+fphp";
  return isa;
#else
  return CpuInstructionSetFrom(ReadFile("/proc/cpuinfo"), machine);
#endif
}

unsigned LogicalCores() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
#elif defined(__APPLE__)
  if (uint64_t n = SysctlNumber("hw.logicalcpu"); n > 0) return static_cast<unsigned>(n);
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1;
}

HostMemory ParseMeminfo(const std::string& text) {
  uint64_t total_kb = 0, avail_kb = 0, free_kb = 0;
  bool have_avail = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (parts.size() < 2) continue;
    uint64_t value = 0;
    if (!absl::SimpleAtoi(parts[1], &value)) continue;
    if (parts[0] == "MemTotal:") total_kb = value;
    if (parts[0] == "MemAvailable:") {
      avail_kb = value;
      have_avail = true;
    }
    if (parts[0] == "MemFree:") free_kb = value;
  }
  if (!have_avail) avail_kb = free_kb;
  HostMemory mem;
  mem.total_bytes = total_kb * 1024;
  mem.used_bytes = total_kb > avail_kb ? (total_kb - avail_kb) * 1024 : 0;
  return mem;
}

uint64_t ContainerMemoryLimit(const std::string& cgroup_root) {
  // cgroup v2: "max" or a byte count; cgroup v1: a byte count, near 2^63
  // when there is no limit.
  for (const std::string& file : {cgroup_root + "/memory.max", cgroup_root + "/memory/memory.limit_in_bytes"}) {
    std::string text(absl::StripAsciiWhitespace(ReadFile(file.c_str())));
    uint64_t bytes = 0;
    if (text.empty() || text == "max" || !absl::SimpleAtoi(text, &bytes)) continue;
    if (bytes >= (uint64_t{1} << 60)) continue;
    return bytes;
  }
  return 0;
}

HostMemory ReadHostMemory() {
#if defined(__APPLE__)
  // Used = total - (free + inactive + purgeable + speculative pages), as
  // Activity Monitor's "memory used" roughly counts it.
  HostMemory mac;
  mac.total_bytes = SysctlNumber("hw.memsize");
  vm_statistics64_data_t vm{};
  mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
  if (host_statistics64(mach_host_self(), HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&vm), &count) ==
      KERN_SUCCESS) {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t available =
        (static_cast<uint64_t>(vm.free_count) + vm.inactive_count + vm.purgeable_count + vm.speculative_count) * page;
    mac.used_bytes = mac.total_bytes > available ? mac.total_bytes - available : 0;
  }
  return mac;
#endif
  HostMemory host = ParseMeminfo(ReadFile("/proc/meminfo"));
  uint64_t limit = ContainerMemoryLimit();
  if (limit == 0 || limit >= host.total_bytes) return host;
  // In a container with a memory limit, that limit is the memory there is;
  // what the container uses counts against it.
  HostMemory container;
  container.total_bytes = limit;
  uint64_t current = 0;
  std::string text(absl::StripAsciiWhitespace(ReadFile("/sys/fs/cgroup/memory.current")));
  if (text.empty() || !absl::SimpleAtoi(text, &current)) {
    text = std::string(absl::StripAsciiWhitespace(ReadFile("/sys/fs/cgroup/memory/memory.usage_in_bytes")));
    if (!absl::SimpleAtoi(text, &current)) current = 0;
  }
  container.used_bytes = std::min(current, limit);
  return container;
}

std::string SetBlasThreads(int threads) {
  for (const char* name : {"openblas_set_num_threads", "bli_thread_set_num_threads", "MKL_Set_Num_Threads"}) {
    if (void* fn = dlsym(RTLD_DEFAULT, name)) {
      reinterpret_cast<void (*)(int)>(fn)(threads);
      return name;
    }
  }
  return "";
}

}  // namespace infergate
