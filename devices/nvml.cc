#include "devices/nvml.h"

#include <dlfcn.h>

#include <map>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/mutex.h"

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
using CountFn = nvmlReturn_t (*)(unsigned int*);
using HandleFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using NameFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using MemoryFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using CapabilityFn = nvmlReturn_t (*)(nvmlDevice_t, int*, int*);

template <typename Fn>
Fn Symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

// One NVML library opened and initialised, kept for the process's lifetime:
// nvmlInit costs milliseconds (tens of them where the driver must wake),
// and every device snapshot (each ListDevices, each metrics scrape) paid it
// with an nvmlShutdown and a dlclose before. Never closed: NVML may be read
// until the process ends, and the driver's state ends with it. Its first
// outcome is kept too: a library absent or a driver that would not
// initialise is not tried again on every snapshot. Thread-safe: reads are
// serialised by the session's own lock.
class Session {
 public:
  // The session for `library`, opened on the first call for that path.
  static Session& For(const std::string& library) {
    static Mutex registry_mu;
    // Leaked on purpose: sessions outlive every static that may read them.
    static auto* sessions = new std::map<std::string, std::unique_ptr<Session>>();
    MutexLock lock(registry_mu);
    std::unique_ptr<Session>& session = (*sessions)[library];
    if (!session) session.reset(new Session(library));
    return *session;
  }

  absl::StatusOr<std::vector<NvmlDevice>> Read() {
    if (!opened_.ok()) return opened_;
    MutexLock lock(mu_);
    std::vector<NvmlDevice> out;
    unsigned int n = 0;
    if (count_(&n) != kNvmlSuccess) return out;
    for (unsigned int i = 0; i < n; ++i) {
      nvmlDevice_t dev = nullptr;
      NvmlDevice d;
      if (handle_(i, &dev) != kNvmlSuccess) {
        out.push_back(d);
        continue;
      }
      char buf[96] = {0};
      if (name_(dev, buf, sizeof(buf) - 1) == kNvmlSuccess) d.name = buf;
      nvmlMemory_t mem{};
      if (memory_(dev, &mem) == kNvmlSuccess) {
        d.memory_total_bytes = mem.total;
        d.memory_used_bytes = mem.used;
      }
      capability_(dev, &d.cc_major, &d.cc_minor);
      out.push_back(std::move(d));
    }
    return out;
  }

 private:
  explicit Session(const std::string& library) { opened_ = Open(library); }

  absl::Status Open(const std::string& library) {
    void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* err = dlerror();
      return absl::NotFoundError(absl::StrCat("NVML library ", library, " not loaded: ", err ? err : "unknown"));
    }
    auto init = Symbol<InitFn>(lib, "nvmlInit_v2");
    count_ = Symbol<CountFn>(lib, "nvmlDeviceGetCount_v2");
    handle_ = Symbol<HandleFn>(lib, "nvmlDeviceGetHandleByIndex_v2");
    name_ = Symbol<NameFn>(lib, "nvmlDeviceGetName");
    memory_ = Symbol<MemoryFn>(lib, "nvmlDeviceGetMemoryInfo");
    capability_ = Symbol<CapabilityFn>(lib, "nvmlDeviceGetCudaComputeCapability");
    if (!init || !count_ || !handle_ || !name_ || !memory_ || !capability_) {
      dlclose(lib);
      return absl::UnavailableError(absl::StrCat("NVML library ", library, " lacks an expected function"));
    }
    if (nvmlReturn_t r = init(); r != kNvmlSuccess) {
      dlclose(lib);
      return absl::UnavailableError(absl::StrCat("nvmlInit_v2 failed with NVML error ", r));
    }
    return absl::OkStatus();
  }

  // Set once, by the constructor.
  CountFn count_ = nullptr;
  HandleFn handle_ = nullptr;
  NameFn name_ = nullptr;
  MemoryFn memory_ = nullptr;
  CapabilityFn capability_ = nullptr;
  absl::Status opened_;
  Mutex mu_;  // NVML's reads are thread-safe; one at a time keeps them cheap to reason about
};

}  // namespace

absl::StatusOr<std::vector<NvmlDevice>> ReadNvmlDevices(const std::string& library) {
  return Session::For(library).Read();
}

}  // namespace infergate
