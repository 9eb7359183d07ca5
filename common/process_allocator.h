#pragma once
// Which allocator the process's malloc is, and how to give its freed
// memory back to the system. The server links jemalloc (cmake/
// allocator.cmake) except in sanitizer builds, where glibc's malloc (or
// the sanitizer's) serves; this reads what actually answers malloc at run
// time, so a link that went wrong shows in the log and the build_info
// metric rather than only as a slower server.
//
// Thread-safe: the answer is computed once, on first use.

#include <string>

namespace infergate {

enum class AllocatorKind { kJemalloc, kSystem };

struct ProcessAllocator {
  AllocatorKind kind = AllocatorKind::kSystem;
  // "jemalloc 5.3.0-0-g54eaed1d8b56" or "system"
  std::string name;
};

// The process's allocator: jemalloc when jemalloc's mallctl is present and
// counts this thread's allocations (a jemalloc linked in while another
// malloc was preloaded ahead of it is not taken for the process's own),
// else "system" (the C library's, or whatever was preloaded).
const ProcessAllocator& CurrentProcessAllocator();

// Gives memory freed since the last call back to the system now: jemalloc
// purges every arena's unused pages, glibc's malloc trims its heaps
// (malloc_trim). Costs a few milliseconds; never on a request's path.
void ReturnFreedMemoryToTheSystem();

}  // namespace infergate
