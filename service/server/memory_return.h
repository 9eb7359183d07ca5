#pragma once
// Gives the memory of finished requests back to the system. An allocator
// keeps freed pages for reuse (glibc in its arenas; jemalloc for seconds,
// and only while something allocates), so without this every spike of
// large requests became permanent RSS. A background thread looks every
// `interval`; when no request bytes are in flight and at least `threshold`
// bytes of requests came and went since it last returned memory, it gives
// the allocator's freed memory back (ReturnFreedMemoryToTheSystem: a purge
// of jemalloc's arenas, or glibc's malloc_trim). It never runs on a
// request's thread and never while a request holds memory.
//
// Threading: constructed and destroyed on one thread; the worker only reads
// the budget's atomics. The budget must outlive this object.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <thread>

#include "common/mutex.h"
#include "service/call/inflight_budget.h"

namespace infergate {

class MemoryReturner {
 public:
  MemoryReturner(const InflightBudget& budget, std::chrono::milliseconds interval, uint64_t threshold);
  ~MemoryReturner();
  MemoryReturner(const MemoryReturner&) = delete;
  MemoryReturner& operator=(const MemoryReturner&) = delete;

  // Times memory was returned; for tests and logs.
  uint64_t returns() const;

 private:
  void Loop();

  const InflightBudget& budget_;
  const std::chrono::milliseconds interval_;
  const uint64_t threshold_;
  mutable Mutex mu_;
  std::condition_variable wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t returns_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace infergate
