#include "devices/system_info.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

TEST(SystemInfo, ParsesMeminfoUsingAvailable) {
  HostMemory m = ParseMeminfo(
      "MemTotal:       16000 kB\nMemFree:         1000 kB\nMemAvailable:    6000 kB\nBuffers: 10 kB\n");
  EXPECT_EQ(m.total_bytes, 16000u * 1024);
  EXPECT_EQ(m.used_bytes, 10000u * 1024);
}

TEST(SystemInfo, FallsBackToMemFreeOnOldKernels) {
  HostMemory m = ParseMeminfo("MemTotal: 100 kB\nMemFree: 40 kB\n");
  EXPECT_EQ(m.used_bytes, 60u * 1024);
}

TEST(SystemInfo, ReadsThisMachine) {
  EXPECT_GE(LogicalCores(), 1u);
  HostMemory m = ReadHostMemory();
  EXPECT_GT(m.total_bytes, 0u);
  EXPECT_LE(m.used_bytes, m.total_bytes);
  EXPECT_FALSE(CpuModelName().empty());
}

}  // namespace
}  // namespace infergate
