#include "service/call_tally.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace infergate {
namespace {

TEST(CallTally, CountsEachCodeAndSaysSoInOneLine) {
  CallTally tally;
  EXPECT_EQ(tally.Summary(), "answered 0 inference calls");
  tally.Count(absl::StatusCode::kOk);
  EXPECT_EQ(tally.Summary(), "answered 1 inference call: OK 1");
  tally.Count(absl::StatusCode::kOk);
  tally.Count(absl::StatusCode::kUnavailable);
  tally.Count(absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tally.Of(absl::StatusCode::kOk), 2u);
  EXPECT_EQ(tally.Of(absl::StatusCode::kUnavailable), 1u);
  EXPECT_EQ(tally.Of(absl::StatusCode::kCancelled), 0u);
  EXPECT_EQ(tally.Total(), 4u);
  EXPECT_EQ(tally.Summary(), "answered 4 inference calls: OK 2, INVALID_ARGUMENT 1, UNAVAILABLE 1");
  tally.CountDrainRefusal();
  tally.Count(absl::StatusCode::kUnavailable);
  EXPECT_EQ(tally.drain_refusals(), 1u);
  EXPECT_EQ(tally.Summary(),
            "answered 5 inference calls: OK 2, INVALID_ARGUMENT 1, UNAVAILABLE 2; 1 refused while draining");
}

TEST(CallTally, ACodeOutsideTheKnownOnesCountsAsUnknown) {
  CallTally tally;
  tally.Count(static_cast<absl::StatusCode>(99));
  EXPECT_EQ(tally.Of(absl::StatusCode::kUnknown), 1u);
  EXPECT_EQ(tally.Summary(), "answered 1 inference call: UNKNOWN 1");
}

TEST(CallTally, CountsFromManyThreadsAddUp) {
  CallTally tally;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) tally.Count(i % 2 ? absl::StatusCode::kOk : absl::StatusCode::kUnavailable);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(tally.Of(absl::StatusCode::kOk), 2000u);
  EXPECT_EQ(tally.Total(), 4000u);
}

}  // namespace
}  // namespace infergate
