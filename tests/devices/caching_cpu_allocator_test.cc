#include "devices/caching_cpu_allocator.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace infergate {
namespace {

constexpr size_t kKiB = 1024;

TEST(CachingCpuAllocator, SizeClassesWasteAtMostAnEighth) {
  EXPECT_EQ(CachingCpuAllocator::SizeClass(64 * kKiB), 64 * kKiB);
  EXPECT_EQ(CachingCpuAllocator::SizeClass(64 * kKiB + 1), 72 * kKiB);
  EXPECT_EQ(CachingCpuAllocator::SizeClass(442368), 448 * kKiB);  // the demo CNN's first im2col buffer
  for (size_t bytes = 64 * kKiB; bytes < (size_t{64} << 20); bytes = bytes * 5 / 4 + 4093) {
    const size_t size_class = CachingCpuAllocator::SizeClass(bytes);
    EXPECT_GE(size_class, bytes);
    EXPECT_LE(size_class, bytes + bytes / 8) << bytes;
    EXPECT_EQ(CachingCpuAllocator::SizeClass(size_class), size_class) << "a class is its own class";
  }
}

TEST(CachingCpuAllocator, AFreedLargeBlockServesTheNextOfItsClass) {
  CachingCpuAllocator allocator(1 << 20);
  void* first = nullptr;
  {
    c10::DataPtr block = allocator.allocate(100 * kKiB);
    first = block.get();
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u) << "LibTorch's alignment";
    std::memset(first, 1, 100 * kKiB);  // the whole block is usable
  }
  EXPECT_EQ(allocator.stats().cached_bytes, CachingCpuAllocator::SizeClass(100 * kKiB));
  c10::DataPtr again = allocator.allocate(99 * kKiB);  // same class
  EXPECT_EQ(again.get(), first);
  CachingCpuAllocator::Stats stats = allocator.stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.cached_bytes, 0u);
  c10::DataPtr other_class = allocator.allocate(200 * kKiB);
  EXPECT_NE(other_class.get(), first);
  EXPECT_EQ(allocator.stats().misses, 2u);
}

TEST(CachingCpuAllocator, SmallBlocksAreNotHeld) {
  CachingCpuAllocator allocator(1 << 20);
  {
    c10::DataPtr block = allocator.allocate(1000);
  }
  EXPECT_EQ(allocator.stats().cached_bytes, 0u);
  EXPECT_EQ(allocator.stats().hits + allocator.stats().misses, 0u);
  c10::DataPtr empty = allocator.allocate(0);
  EXPECT_EQ(empty.get(), nullptr);
}

// LibTorch frees some scratch buffers with raw_deallocate(), which calls
// raw_deleter() on the bare data pointer; a context other than the data
// pointer fails LibTorch's internal assertion there.
TEST(CachingCpuAllocator, RawAllocationsRoundTrip) {
  CachingCpuAllocator allocator(1 << 20);
  for (size_t bytes : {size_t{16}, 80 * kKiB, size_t{0}}) {
    void* p = allocator.raw_allocate(bytes);
    if (bytes > 0) std::memset(p, 7, bytes);
    allocator.raw_deallocate(p);
  }
  EXPECT_EQ(allocator.stats().cached_bytes, CachingCpuAllocator::SizeClass(80 * kKiB));
}

TEST(CachingCpuAllocator, HoldsAtMostItsLimitAndReleasesTheLeastRecentlyFreed) {
  CachingCpuAllocator allocator(256 * kKiB);
  c10::DataPtr a = allocator.allocate(128 * kKiB);
  c10::DataPtr b = allocator.allocate(128 * kKiB);
  c10::DataPtr c = allocator.allocate(128 * kKiB);
  void* newest = c.get();
  void* middle = b.get();
  a.clear();  // freed first: the one to go
  b.clear();
  c.clear();
  CachingCpuAllocator::Stats stats = allocator.stats();
  EXPECT_EQ(stats.cached_bytes, 256 * kKiB);
  EXPECT_EQ(stats.released, 1u);
  c10::DataPtr x = allocator.allocate(128 * kKiB);
  c10::DataPtr y = allocator.allocate(128 * kKiB);
  EXPECT_EQ(x.get(), newest) << "the most recently freed block is reused first";
  EXPECT_EQ(y.get(), middle);
  // A block larger than the whole limit is never held.
  {
    c10::DataPtr huge = allocator.allocate(512 * kKiB);
  }
  EXPECT_EQ(allocator.stats().cached_bytes, 0u);
  allocator.Release();
  EXPECT_EQ(allocator.stats().cached_bytes, 0u);
}

TEST(CachingCpuAllocator, TensorsOnItsStorageComputeAndComeBack) {
  CachingCpuAllocator allocator(4 << 20);
  const int64_t n = 64 * 1024;  // 256 KiB of float
  for (int round = 0; round < 3; ++round) {
    c10::Storage storage(c10::Storage::use_byte_size_t(), n * sizeof(float), &allocator);
    at::Tensor t = at::empty({0}, at::kFloat).set_(storage, 0, {n}, {1});
    t.fill_(2.0f);
    EXPECT_FLOAT_EQ(t.sum().item<float>(), 2.0f * static_cast<float>(n));
  }
  CachingCpuAllocator::Stats stats = allocator.stats();
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.hits, 2u);
}

}  // namespace
}  // namespace infergate
