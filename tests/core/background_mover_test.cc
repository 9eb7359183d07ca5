// The background mover: moves deduplicated while pending, run off the
// caller's thread, a failed move not retried until its back-off passes,
// and a stop that drops what waits.
#include "scheduler/cache/background_mover.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace infergate {
namespace {

using std::chrono::milliseconds;

bool WaitFor(const std::function<bool()>& done) {
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30); std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(milliseconds(1))) {
    if (done()) return true;
  }
  return done();
}

TEST(BackgroundMover, AMoveWantedTwiceWhilePendingRunsOnceOffTheCallersThread) {
  std::atomic<int> runs{0};
  std::atomic<bool> release{false};
  std::thread::id ran_on;
  BackgroundMover mover([&](const BackgroundMover::Wanted&) {
    ran_on = std::this_thread::get_id();
    while (!release.load()) std::this_thread::sleep_for(milliseconds(1));
    ++runs;
    return absl::OkStatus();
  });
  const BackgroundMover::Wanted mlp{"mlp", 1, {DeviceKind::kCuda, 0}, Precision::kAuto};
  EXPECT_TRUE(mover.Want(mlp));
  EXPECT_FALSE(mover.Want(mlp)) << "wanted again while pending";
  EXPECT_TRUE(mover.Want({"mlp", 1, {DeviceKind::kCuda, 1}, Precision::kAuto})) << "another device is another move";
  release = true;
  ASSERT_TRUE(WaitFor([&] { return mover.moved() == 2; }));
  EXPECT_EQ(runs.load(), 2);
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_EQ(mover.pending(), 0u);
  EXPECT_TRUE(mover.Want(mlp)) << "done: it may be wanted again";
}

TEST(BackgroundMover, AFailedMoveIsNotTriedAgainUntilItsBackOffPasses) {
  std::atomic<int> runs{0};
  BackgroundMover mover(
      [&](const BackgroundMover::Wanted&) {
        ++runs;
        return absl::ResourceExhaustedError("does not fit");
      },
      64, milliseconds(300));
  const BackgroundMover::Wanted big{"big", 1, {DeviceKind::kCuda, 0}, Precision::kAuto};
  ASSERT_TRUE(mover.Want(big));
  ASSERT_TRUE(WaitFor([&] { return mover.failed() == 1; }));
  EXPECT_FALSE(mover.Want(big)) << "retried at once after failing";
  std::this_thread::sleep_for(milliseconds(350));
  EXPECT_TRUE(mover.Want(big));
  ASSERT_TRUE(WaitFor([&] { return mover.failed() == 2; }));
  EXPECT_EQ(runs.load(), 2);
}

TEST(BackgroundMover, StopDropsWhatWaitsAndRefusesMore) {
  std::atomic<bool> release{false};
  std::atomic<int> runs{0};
  BackgroundMover mover([&](const BackgroundMover::Wanted&) {
    while (!release.load()) std::this_thread::sleep_for(milliseconds(1));
    ++runs;
    return absl::OkStatus();
  });
  ASSERT_TRUE(mover.Want({"a", 1, {DeviceKind::kCuda, 0}, Precision::kAuto}));
  ASSERT_TRUE(WaitFor([&] { return mover.pending() == 1; }));
  ASSERT_TRUE(mover.Want({"b", 1, {DeviceKind::kCuda, 0}, Precision::kAuto}));
  std::thread stopper([&] { mover.Stop(); });
  std::this_thread::sleep_for(milliseconds(50));
  release = true;
  stopper.join();
  EXPECT_LE(runs.load(), 1) << "a move waiting at the stop ran";
  EXPECT_FALSE(mover.Want({"c", 1, {DeviceKind::kCuda, 0}, Precision::kAuto}));
}

}  // namespace
}  // namespace infergate
