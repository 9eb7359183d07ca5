#include "devices/system_info.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace infergate {
namespace {

TEST(SystemInfo, ParsesMeminfoUsingAvailable) {
  HostMemory m =
      ParseMeminfo("MemTotal:       16000 kB\nMemFree:         1000 kB\nMemAvailable:    6000 kB\nBuffers: 10 kB\n");
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

// The test binary links LibTorch, so the BLAS it calls is loaded; with
// Debian's OpenBLAS (what deploy/install-deps.sh installs) the setter is
// found and its pool really shrinks.
TEST(SystemInfo, SetsTheBlasThreadPoolSize) {
  std::string setter = SetBlasThreads(1);
  auto get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  // The README promises OpenBLAS (deploy/install-deps.sh installs it): its
  // absence is a failure, not a reason to skip.
  ASSERT_NE(get, nullptr) << "the BLAS here is not OpenBLAS (setter: '" << setter << "')";
  EXPECT_EQ(setter, "openblas_set_num_threads");
  EXPECT_EQ(get(), 1);
  SetBlasThreads(2);
  EXPECT_EQ(get(), 2);
}

}  // namespace
}  // namespace infergate

namespace infergate {
namespace {

class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/cgroup-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(const std::string& file, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root_ + "/" + file).parent_path());
    std::ofstream(root_ + "/" + file) << text;
  }
  std::string root_;
};

TEST_F(CgroupTest, ReadsTheV2AndV1Limits) {
  EXPECT_EQ(ContainerMemoryLimit(root_), 0u);                      // no cgroup files: no limit
  Write("memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1 without a limit
  EXPECT_EQ(ContainerMemoryLimit(root_), 0u);
  Write("memory/memory.limit_in_bytes", "4294967296\n");
  EXPECT_EQ(ContainerMemoryLimit(root_), 4294967296u);
  Write("memory.max", "max\n");  // v2 without a limit falls through to v1's file
  EXPECT_EQ(ContainerMemoryLimit(root_), 4294967296u);
  Write("memory.max", "8589934592\n");
  EXPECT_EQ(ContainerMemoryLimit(root_), 8589934592u);
}

}  // namespace
}  // namespace infergate
