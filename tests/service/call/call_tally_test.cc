#include "service/call/call_tally.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "scheduler/execution/drain_refusal.h"

namespace infergate {
namespace {

TEST(CallTally, CountsEachCodeAndSaysSoInOneLine) {
  CallTally tally;
  EXPECT_EQ(tally.Summary(), "answered 0 inference calls");
  tally.Count(absl::OkStatus());
  EXPECT_EQ(tally.Summary(), "answered 1 inference call: OK 1");
  tally.Count(absl::OkStatus());
  tally.Count(absl::UnavailableError("waited 300000 us in the queue of cpu, beyond its queue timeout"));
  tally.Count(absl::InvalidArgumentError("inputs[0].shape"));
  EXPECT_EQ(tally.Of(absl::StatusCode::kOk), 2u);
  EXPECT_EQ(tally.Of(absl::StatusCode::kUnavailable), 1u);
  EXPECT_EQ(tally.Of(absl::StatusCode::kCancelled), 0u);
  EXPECT_EQ(tally.Total(), 4u);
  EXPECT_EQ(tally.Summary(), "answered 4 inference calls: OK 2, INVALID_ARGUMENT 1, UNAVAILABLE 1");
  tally.Count(DrainRefusal("server is draining; retry on another replica"));
  EXPECT_EQ(tally.drain_refusals(), 1u);
  EXPECT_EQ(tally.Summary(),
            "answered 5 inference calls: OK 2, INVALID_ARGUMENT 1, UNAVAILABLE 2; 1 refused while draining");
}

// Every drain refusal is counted as one, wherever it was made (the status
// carries the mark), and nothing else is: not another UNAVAILABLE with the
// same words, nor a drain refusal's message copied into a new status.
TEST(CallTally, DrainRefusalsAreKnownByTheirMarkNotTheirWords) {
  CallTally tally;
  const absl::Status refusal = DrainRefusal("server is draining; retry on another replica");
  EXPECT_TRUE(IsDrainRefusal(refusal));
  EXPECT_EQ(refusal.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(refusal.message(), "server is draining; retry on another replica");
  tally.Count(refusal);
  tally.Count(absl::UnavailableError(refusal.message()));
  tally.Count(absl::Status(refusal));  // a copy keeps the mark
  EXPECT_FALSE(IsDrainRefusal(absl::UnavailableError(refusal.message())));
  EXPECT_FALSE(IsDrainRefusal(absl::OkStatus()));
  EXPECT_EQ(tally.drain_refusals(), 2u);
  EXPECT_EQ(tally.Of(absl::StatusCode::kUnavailable), 3u);
}

TEST(CallTally, ACodeOutsideTheKnownOnesCountsAsUnknown) {
  CallTally tally;
  tally.Count(absl::Status(static_cast<absl::StatusCode>(99), "from elsewhere"));
  EXPECT_EQ(tally.Of(absl::StatusCode::kUnknown), 1u);
  EXPECT_EQ(tally.Summary(), "answered 1 inference call: UNKNOWN 1");
}

TEST(CallTally, CountsFromManyThreadsAddUp) {
  CallTally tally;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) tally.Count(i % 2 ? absl::OkStatus() : absl::UnavailableError("busy"));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(tally.Of(absl::StatusCode::kOk), 2000u);
  EXPECT_EQ(tally.Total(), 4000u);
}

}  // namespace
}  // namespace infergate
