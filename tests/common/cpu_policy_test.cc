#include "common/cpu_policy.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>

#include <cerrno>
#include <thread>

namespace infergate {
namespace {

// Runs `body` on a thread of its own, so the test process's threads keep
// their policy.
template <typename Body>
void OnOwnThread(Body body) {
  std::thread t(body);
  t.join();
}

TEST(CpuPolicy, NamesParseBackAndOthersAreRefusedByName) {
  for (CpuPolicy p : {CpuPolicy::kNormal, CpuPolicy::kBatch}) {
    absl::StatusOr<CpuPolicy> parsed = ParseCpuPolicy(CpuPolicyName(p));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, p);
  }
  absl::StatusOr<CpuPolicy> bad = ParseCpuPolicy("fifo");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'fifo'"), std::string::npos) << bad.status();
}

#if defined(__linux__)
TEST(CpuPolicy, SetsTheCallingThreadOnlyAndThreadsItStartsInheritIt) {
  OnOwnThread([] {
    ASSERT_TRUE(SetThisThreadCpuPolicy(CpuPolicy::kBatch).ok());
    EXPECT_EQ(sched_getscheduler(0), SCHED_BATCH);
    // A thread started now inherits it, and may go back to normal itself.
    OnOwnThread([] {
      EXPECT_EQ(sched_getscheduler(0), SCHED_BATCH);
      ASSERT_TRUE(SetThisThreadCpuPolicy(CpuPolicy::kNormal).ok());
      EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
    });
    // The child's change did not reach its parent.
    EXPECT_EQ(sched_getscheduler(0), SCHED_BATCH);
  });
  // Nor this thread, which started the first.
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
}

TEST(CpuPolicy, TheNiceValueIsKept) {
  OnOwnThread([] {
    errno = 0;
    const int before = getpriority(PRIO_PROCESS, 0);
    ASSERT_EQ(errno, 0);
    ASSERT_TRUE(SetThisThreadCpuPolicy(CpuPolicy::kBatch).ok());
    EXPECT_EQ(getpriority(PRIO_PROCESS, 0), before);
  });
}
#endif

}  // namespace
}  // namespace infergate
