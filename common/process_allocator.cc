#include "common/process_allocator.h"

#include <dlfcn.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdint>
#include <cstdlib>

namespace infergate {
namespace {

// jemalloc's control interface, looked up rather than linked: the sanitizer
// builds have no jemalloc.
using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);

Mallctl FindMallctl() { return reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl")); }

// Whether jemalloc counts an allocation this thread makes: it then is the
// malloc the process calls.
bool CountsThisThreadsAllocations(Mallctl mallctl) {
  uint64_t before = 0, after = 0;
  size_t size = sizeof(uint64_t);
  if (mallctl("thread.allocated", &before, &size, nullptr, 0) != 0) return false;
  void* volatile block = std::malloc(1 << 16);
  size = sizeof(uint64_t);
  const bool read = mallctl("thread.allocated", &after, &size, nullptr, 0) == 0;
  std::free(block);
  return read && after >= before + (1 << 16);
}

// What CurrentProcessAllocator answers, and jemalloc's control interface
// when jemalloc is the process's malloc (else null).
struct Detected {
  ProcessAllocator allocator;
  Mallctl jemalloc = nullptr;
};

Detected Detect() {
  Detected detected;
  ProcessAllocator& allocator = detected.allocator;
  allocator.name = "system";
  Mallctl mallctl = FindMallctl();
  if (mallctl == nullptr || !CountsThisThreadsAllocations(mallctl)) return detected;
  detected.jemalloc = mallctl;
  allocator.kind = AllocatorKind::kJemalloc;
  const char* version = nullptr;
  size_t size = sizeof(version);
  allocator.name = "jemalloc";
  if (mallctl("version", &version, &size, nullptr, 0) == 0 && version != nullptr) {
    allocator.name += " ";
    allocator.name += version;
  }
  return detected;
}

const Detected& Detection() {
  static const Detected detected = Detect();
  return detected;
}

}  // namespace

const ProcessAllocator& CurrentProcessAllocator() { return Detection().allocator; }

void ReturnFreedMemoryToTheSystem() {
  if (Mallctl jemalloc = Detection().jemalloc) {
    // MALLCTL_ARENAS_ALL (4096): every arena.
    jemalloc("arena.4096.purge", nullptr, nullptr, nullptr, 0);
    return;
  }
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace infergate
