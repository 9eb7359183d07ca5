#include "common/process_allocator.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

// This test binary links no allocator of its own: glibc's malloc (or a
// sanitizer's) serves it. (That the server's link makes jemalloc the
// process's malloc, and says so: ServerTest.BuildInfoNamesTheAllocator-
// TheBuildLinked. Debian's jemalloc cannot be loaded later with dlopen:
// its thread-local state needs the static TLS block.)
TEST(ProcessAllocator, WithoutJemallocLinkedTheSystemsServes) {
  EXPECT_EQ(CurrentProcessAllocator().kind, AllocatorKind::kSystem);
  EXPECT_EQ(CurrentProcessAllocator().name, "system");
  ReturnFreedMemoryToTheSystem();  // malloc_trim, and no crash
}

}  // namespace
}  // namespace infergate
