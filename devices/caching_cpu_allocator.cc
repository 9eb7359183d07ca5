#include "devices/caching_cpu_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>
#include <c10/util/Exception.h>
#include <stdlib.h>

#include <atomic>
#include <bit>
#include <new>
#include <vector>

namespace infergate {
namespace {

// Every block starts with this header, one alignment unit long, so the
// tensor's data keeps LibTorch's alignment and the deleter (a plain function
// of the data pointer, as raw_deleter() requires) finds its allocator and
// size class.
struct BlockHeader {
  const CachingCpuAllocator* owner;
  size_t size_class;
};
constexpr size_t kHeaderBytes = c10::gAlignment;
static_assert(sizeof(BlockHeader) <= kHeaderBytes);

void* AllocateBlock(size_t size_class) {
  void* base = nullptr;
  if (posix_memalign(&base, c10::gAlignment, size_class + kHeaderBytes) != 0) return nullptr;
  return base;
}

}  // namespace

CachingCpuAllocator::CachingCpuAllocator(size_t max_cached_bytes) : max_cached_bytes_(max_cached_bytes) {}

CachingCpuAllocator::~CachingCpuAllocator() { Release(); }

size_t CachingCpuAllocator::SizeClass(size_t bytes) {
  const size_t power = std::bit_floor(bytes);
  const size_t step = power / 8;
  return (bytes + step - 1) / step * step;
}

c10::DataPtr CachingCpuAllocator::allocate(size_t bytes) {
  const c10::Device cpu(c10::DeviceType::CPU);
  if (bytes == 0) return c10::DataPtr(nullptr, nullptr, &CachingCpuAllocator::Delete, cpu);
  // Small blocks are the C library's to recycle (size class 0: freed at
  // once); they carry the header too, since LibTorch may free any block
  // through raw_deleter().
  const size_t size_class = bytes < kMinCachedBytes ? 0 : SizeClass(bytes);
  void* base = nullptr;
  if (size_class != 0) {
    MutexLock lock(mu_);
    auto it = by_class_.find(size_class);
    if (it != by_class_.end() && !it->second.empty()) {
      Lru::iterator newest = it->second.back();
      it->second.pop_back();
      base = newest->base;
      lru_.erase(newest);
      stats_.cached_bytes -= size_class;
      stats_.hits++;
    } else {
      stats_.misses++;
    }
  }
  const size_t block_bytes = size_class != 0 ? size_class : bytes;
  if (base == nullptr) base = AllocateBlock(block_bytes);
  if (base == nullptr) {
    // What is held for other sizes may be what the system lacks.
    Release();
    base = AllocateBlock(block_bytes);
  }
  TORCH_CHECK_WITH(OutOfMemoryError, base != nullptr, "CPU out of memory: cannot allocate ", bytes,
                   " bytes for a tensor");
  new (base) BlockHeader{this, size_class};
  void* data = static_cast<char*>(base) + kHeaderBytes;
  return c10::DataPtr(data, data, &CachingCpuAllocator::Delete, cpu);
}

c10::DeleterFnPtr CachingCpuAllocator::raw_deleter() const { return &CachingCpuAllocator::Delete; }

void CachingCpuAllocator::Delete(void* data) {
  if (data == nullptr) return;
  void* base = static_cast<char*>(data) - kHeaderBytes;
  const BlockHeader* header = static_cast<const BlockHeader*>(base);
  if (header->size_class == 0) {
    free(base);
    return;
  }
  header->owner->Recycle(base, header->size_class);
}

void CachingCpuAllocator::Recycle(void* base, size_t size_class) const {
  std::vector<void*> evicted;
  {
    MutexLock lock(mu_);
    if (size_class > max_cached_bytes_) {
      evicted.push_back(base);
    } else {
      lru_.push_front(FreeBlock{size_class, base});
      by_class_[size_class].push_back(lru_.begin());
      stats_.cached_bytes += size_class;
      while (stats_.cached_bytes > max_cached_bytes_) {
        const FreeBlock oldest = lru_.back();
        // The least recently freed block is also the oldest of its class.
        by_class_[oldest.size_class].pop_front();
        lru_.pop_back();
        stats_.cached_bytes -= oldest.size_class;
        stats_.released++;
        evicted.push_back(oldest.base);
      }
    }
  }
  for (void* block : evicted) free(block);
}

CachingCpuAllocator::Stats CachingCpuAllocator::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

void CachingCpuAllocator::Release() const {
  std::vector<void*> held;
  {
    MutexLock lock(mu_);
    for (const FreeBlock& block : lru_) held.push_back(block.base);
    stats_.released += lru_.size();
    stats_.cached_bytes = 0;
    lru_.clear();
    by_class_.clear();
  }
  for (void* block : held) free(block);
}

namespace {
std::atomic<const CachingCpuAllocator*> process_allocator{nullptr};
}  // namespace

const CachingCpuAllocator* CachingCpuAllocator::ForProcess() { return process_allocator.load(); }

CachingCpuAllocator* CachingCpuAllocator::InstallForProcess(size_t max_cached_bytes) {
#if defined(__SANITIZE_ADDRESS__)
  (void)max_cached_bytes;
  return nullptr;
#else
  if (max_cached_bytes == 0) return nullptr;
  // Never deleted: tensors freed after main() returns still come back here.
  static CachingCpuAllocator* const instance = new CachingCpuAllocator(max_cached_bytes);
  c10::SetCPUAllocator(instance, /*priority=*/1);
  process_allocator.store(instance);
  return instance;
#endif
}

}  // namespace infergate
