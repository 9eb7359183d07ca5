#include "scheduler/device_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

namespace infergate {
namespace {

TEST(DeviceExecutor, RunsEverythingQueuedBeforeStopping) {
  std::atomic<int> ran{0};
  DeviceExecutor ex({DeviceKind::kCpu, 0}, 2, 1000);
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(ex.Submit([&] { ran++; }).ok());
  ex.Stop();
  EXPECT_EQ(ran.load(), 500);
  absl::Status late = ex.Submit([] {});
  EXPECT_EQ(late.code(), absl::StatusCode::kUnavailable);
}

TEST(DeviceExecutor, FullQueueIsResourceExhausted) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::promise<void> started;
  DeviceExecutor ex({DeviceKind::kCpu, 0}, 1, 2);
  ASSERT_TRUE(ex.Submit([&] {
                  started.set_value();
                  gate.wait();
                }).ok());
  started.get_future().wait();  // the worker holds the first task
  EXPECT_TRUE(ex.Submit([] {}).ok());
  EXPECT_TRUE(ex.Submit([] {}).ok());
  absl::Status full = ex.Submit([] {});
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("cpu"), absl::string_view::npos);
  EXPECT_EQ(ex.queue_depth(), 2u);
  EXPECT_EQ(ex.in_flight(), 1u);
  release.set_value();
  ex.Stop();
  EXPECT_EQ(ex.queue_depth(), 0u);
}

}  // namespace
}  // namespace infergate
