#include "devices/nvml.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "tests/common/build_paths.h"

namespace infergate {
namespace {

TEST(Nvml, AbsentLibraryIsNotFound) {
  for (int i = 0; i < 2; ++i) {  // the first answer kept
    auto devices = ReadNvmlDevices("libnvidia-ml-does-not-exist.so.1");
    EXPECT_EQ(devices.status().code(), absl::StatusCode::kNotFound);
  }
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

// The library is initialised once for the process, not on every read (a
// snapshot of the devices is taken on each ListDevices and metrics scrape),
// and each read still asks for the memory in use now.
TEST(Nvml, InitialisesTheLibraryOnceAndReadsTheDevicesOnEveryCall) {
  ASSERT_TRUE(ReadNvmlDevices(testing::FakeNvmlLibrary()).ok());
  // The same loaded copy of the fake, whose counters the reads moved.
  void* fake = dlopen(testing::FakeNvmlLibrary(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(fake, nullptr) << "the fake NVML library was not kept loaded";
  auto inits = reinterpret_cast<int (*)()>(dlsym(fake, "fake_nvml_inits"));
  auto set_used = reinterpret_cast<void (*)(unsigned int, unsigned long long)>(dlsym(fake, "fake_nvml_set_used"));
  ASSERT_NE(inits, nullptr);
  ASSERT_NE(set_used, nullptr);
  set_used(0, 3ull << 30);
  for (int i = 0; i < 3; ++i) {
    auto devices = ReadNvmlDevices(testing::FakeNvmlLibrary());
    ASSERT_TRUE(devices.ok()) << devices.status();
    EXPECT_EQ((*devices)[0].memory_used_bytes, 3ull << 30) << "read " << i;
  }
  set_used(0, 1ull << 30);
  EXPECT_EQ(inits(), 1);
  dlclose(fake);  // the reference NOLOAD took
}

}  // namespace
}  // namespace infergate
