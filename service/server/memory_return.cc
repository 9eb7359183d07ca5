#include "service/server/memory_return.h"

#include "common/process_allocator.h"

namespace infergate {

MemoryReturner::MemoryReturner(const InflightBudget& budget, std::chrono::milliseconds interval, uint64_t threshold)
    : budget_(budget), interval_(interval), threshold_(threshold), thread_([this] { Loop(); }) {}

MemoryReturner::~MemoryReturner() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

uint64_t MemoryReturner::returns() const {
  MutexLock lock(mu_);
  return returns_;
}

void MemoryReturner::Loop() {
  uint64_t returned_through = budget_.reserved_total();
  UniqueMutexLock lock(mu_);
  while (!wake_.wait_for(lock.native(), interval_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; })) {
    const uint64_t total = budget_.reserved_total();
    if (budget_.in_use() != 0 || total - returned_through < threshold_) continue;
    returned_through = total;
    lock.Unlock();
    ReturnFreedMemoryToTheSystem();
    lock.Lock();
    ++returns_;
  }
}

}  // namespace infergate
