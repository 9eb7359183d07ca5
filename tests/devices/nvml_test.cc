#include "devices/nvml.h"

#include <gtest/gtest.h>

#include "tests/common/build_paths.h"

namespace infergate {
namespace {

TEST(Nvml, AbsentLibraryIsNotFound) {
  auto devices = ReadNvmlDevices("libnvidia-ml-does-not-exist.so.1");
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kNotFound);
}

TEST(Nvml, ReadsNamesMemoryAndCapabilityFromTheLibrary) {
  auto devices = ReadNvmlDevices(testing::FakeNvmlLibrary());
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].name, "Fake A100-SXM4-40GB");
  EXPECT_EQ((*devices)[0].memory_total_bytes, 40ull << 30);
  EXPECT_EQ((*devices)[0].memory_used_bytes, 1ull << 30);
  EXPECT_EQ((*devices)[0].cc_major, 8);
  EXPECT_EQ((*devices)[1].cc_major, 7);
  EXPECT_EQ((*devices)[1].cc_minor, 5);
}

}  // namespace
}  // namespace infergate
