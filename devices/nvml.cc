#include "devices/nvml.h"

#include <dlfcn.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

// The few NVML declarations we use, written out so no NVIDIA header is
// needed at build time. Layouts follow NVML's public ABI.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr nvmlReturn_t kNvmlSuccess = 0;

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using CountFn = nvmlReturn_t (*)(unsigned int*);
using HandleFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using NameFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using MemoryFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using CapabilityFn = nvmlReturn_t (*)(nvmlDevice_t, int*, int*);

class Library {
 public:
  explicit Library(const std::string& path) : handle_(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle_) dlclose(handle_);
  }
  bool ok() const { return handle_ != nullptr; }
  template <typename Fn>
  Fn Get(const char* name) const {
    return reinterpret_cast<Fn>(dlsym(handle_, name));
  }

 private:
  void* handle_;
};

}  // namespace

absl::StatusOr<std::vector<NvmlDevice>> ReadNvmlDevices(const std::string& library) {
  Library lib(library);
  if (!lib.ok()) {
    const char* err = dlerror();
    return absl::NotFoundError(absl::StrCat("NVML library ", library, " not loaded: ", err ? err : "unknown"));
  }
  auto init = lib.Get<InitFn>("nvmlInit_v2");
  auto shutdown = lib.Get<ShutdownFn>("nvmlShutdown");
  auto count = lib.Get<CountFn>("nvmlDeviceGetCount_v2");
  auto handle = lib.Get<HandleFn>("nvmlDeviceGetHandleByIndex_v2");
  auto name = lib.Get<NameFn>("nvmlDeviceGetName");
  auto memory = lib.Get<MemoryFn>("nvmlDeviceGetMemoryInfo");
  auto capability = lib.Get<CapabilityFn>("nvmlDeviceGetCudaComputeCapability");
  if (!init || !shutdown || !count || !handle || !name || !memory || !capability) {
    return absl::UnavailableError(absl::StrCat("NVML library ", library, " lacks an expected function"));
  }
  if (nvmlReturn_t r = init(); r != kNvmlSuccess) {
    return absl::UnavailableError(absl::StrCat("nvmlInit_v2 failed with NVML error ", r));
  }
  std::vector<NvmlDevice> out;
  unsigned int n = 0;
  if (count(&n) == kNvmlSuccess) {
    for (unsigned int i = 0; i < n; ++i) {
      nvmlDevice_t dev = nullptr;
      NvmlDevice d;
      if (handle(i, &dev) != kNvmlSuccess) {
        out.push_back(d);
        continue;
      }
      char buf[96] = {0};
      if (name(dev, buf, sizeof(buf) - 1) == kNvmlSuccess) d.name = buf;
      nvmlMemory_t mem{};
      if (memory(dev, &mem) == kNvmlSuccess) {
        d.memory_total_bytes = mem.total;
        d.memory_used_bytes = mem.used;
      }
      capability(dev, &d.cc_major, &d.cc_minor);
      out.push_back(std::move(d));
    }
  }
  shutdown();
  return out;
}

}  // namespace infergate
