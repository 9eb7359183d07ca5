#pragma once
// LibTorch's allocator for CPU tensors, keeping freed large blocks for the
// next tensor of the same size class instead of handing them back to the C
// library.
//
// Why: a forward pass allocates its activations and scratch buffers (im2col
// for a convolution, a batch's joined inputs) afresh on every call, blocks of
// hundreds of kilobytes to megabytes. The C library returns such blocks to
// the kernel when they are freed (the server maps blocks of 1 MiB and more
// on their own so that a burst of large requests leaves RSS again, and
// trims the heap top beyond 128 KiB), so every call faulted its pages in
// again: for the 3x64x64 demo CNN a third of the server's CPU time went to
// page faults, and a batch of 2 cost three times a batch of 1. Keeping the
// blocks here makes them reusable without making request buffers (gRPC's,
// outside LibTorch) any stickier.
//
// Blocks below kMinCachedBytes are freed to the C library at once, which
// serves them well. Larger ones are rounded up to a size class (eight classes per
// power of two, so at most 12.5% is wasted) and, when freed, kept up to
// `max_cached_bytes` in all; beyond that the least recently freed blocks go
// back to the system. Reuse takes the most recently freed block of a class,
// the one most likely still in cache.
//
// Threading: allocate() and the deleter may run on any thread; one mutex
// guards the free lists (a few large allocations per forward pass). The
// allocator installed for the process is never destroyed: tensors may
// outlive main().

#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <unordered_map>

#include "common/mutex.h"

namespace infergate {

class CachingCpuAllocator final : public c10::Allocator {
 public:
  static constexpr size_t kMinCachedBytes = 64 << 10;

  struct Stats {
    uint64_t cached_bytes = 0;  // free blocks held now
    uint64_t hits = 0;          // allocations served from a held block
    uint64_t misses = 0;        // allocations of a cached size that went to the C library
    uint64_t released = 0;      // held blocks handed back to make room
  };

  explicit CachingCpuAllocator(size_t max_cached_bytes);
  ~CachingCpuAllocator() override;
  CachingCpuAllocator(const CachingCpuAllocator&) = delete;
  CachingCpuAllocator& operator=(const CachingCpuAllocator&) = delete;

  c10::DataPtr allocate(size_t bytes) override;
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
  // LibTorch frees some scratch buffers through this (raw_deallocate).
  c10::DeleterFnPtr raw_deleter() const override;

  Stats stats() const;
  // Hands every held block back to the system (also done by allocate()
  // when the system has no memory left).
  void Release() const;

  // The size class a request of `bytes` (>= kMinCachedBytes) is served from.
  static size_t SizeClass(size_t bytes);

  // Makes a process-wide instance LibTorch's CPU allocator and returns it;
  // nullptr (and LibTorch's own allocator stays) when `max_cached_bytes` is
  // 0, or under AddressSanitizer, whose use-after-free checks a reused block
  // would hide. Call once, before the first tensor is made.
  static CachingCpuAllocator* InstallForProcess(size_t max_cached_bytes);
  // The instance InstallForProcess installed, or nullptr (for metrics).
  static const CachingCpuAllocator* ForProcess();

 private:
  struct FreeBlock {
    size_t size_class;
    void* base;
  };
  using Lru = std::list<FreeBlock>;  // front: most recently freed

  static void Delete(void* data);
  void Recycle(void* base, size_t size_class) const;

  const size_t max_cached_bytes_;
  mutable Mutex mu_;
  mutable Lru lru_ ABSL_GUARDED_BY(mu_);
  // Per size class, its blocks in `lru_`, oldest first.
  mutable std::unordered_map<size_t, std::deque<Lru::iterator>> by_class_ ABSL_GUARDED_BY(mu_);
  mutable Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infergate
