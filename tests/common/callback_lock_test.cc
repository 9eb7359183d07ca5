#include "common/callback_lock.h"

#include <gtest/gtest.h>

#include <thread>

namespace infergate {
namespace {

TEST(CallbackLock, CountsWhatThisThreadHolds) {
  CallbackLock a, b;
  EXPECT_EQ(CallbackLock::HeldByThisThread(), 0);
  {
    CallbackLockGuard la(a);
    {
      CallbackLockGuard lb(b);
      EXPECT_EQ(CallbackLock::HeldByThisThread(), 2);
      int other = -1;
      std::thread([&other] { other = CallbackLock::HeldByThisThread(); }).join();
      EXPECT_EQ(other, 0) << "another thread's count";
    }
    EXPECT_EQ(CallbackLock::HeldByThisThread(), 1);
  }
  EXPECT_EQ(CallbackLock::HeldByThisThread(), 0);
  CheckNoCallbackLockHeld("free");  // returns
}

// Running an answer's callback under a front end's lock (the stream-cancel
// deadlock) stops the process with the place named instead of wedging it.
TEST(CallbackLockDeathTest, ACallbackUnderTheLockStopsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        CallbackLock stream_state;
        CallbackLockGuard held(stream_state);
        CheckNoCallbackLockHeld("Job::Finish");
      },
      "Job::Finish: an answer's callback would run on a thread that holds a front end's lock");
}

}  // namespace
}  // namespace infergate
