#include "devices/host_requirements.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

#include "common/file_util.h"

namespace infergate {
namespace {

class HostRequirementsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/proc-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(HostRequirementsTest, ThisMachineHasWhatTheServerNeeds) { EXPECT_TRUE(CheckHostRequirements().ok()); }

TEST_F(HostRequirementsTest, AMissingCpuinfoNamesTheFileAndTheFix) {
  absl::Status s = CheckHostRequirements(dir_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find(dir_ + "/cpuinfo"), std::string::npos) << s;
  EXPECT_NE(s.message().find("mount -t proc"), std::string::npos) << s;
}

TEST_F(HostRequirementsTest, AnEmptyCpuinfoIsRefusedToo) {
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/cpuinfo", "").ok());
  EXPECT_EQ(CheckHostRequirements(dir_).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/cpuinfo", "processor\t: 0\nmodel name\t: test\n").ok());
  EXPECT_TRUE(CheckHostRequirements(dir_).ok());
}

}  // namespace
}  // namespace infergate
