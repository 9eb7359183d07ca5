#include "service/call/inflight_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace infergate {
namespace {

TEST(InflightBudget, RefusesWhatWouldPassTheLimitAndReleasesOnDestruction) {
  InflightBudget budget(1000);
  absl::StatusOr<InflightBudget::Reservation> a = budget.Reserve(600);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(budget.in_use(), 600u);
  absl::StatusOr<InflightBudget::Reservation> b = budget.Reserve(500);
  ASSERT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("--max-inflight-bytes"), std::string::npos) << b.status();
  EXPECT_NE(b.status().message().find("needs 500"), std::string::npos) << b.status();
  EXPECT_TRUE(budget.Reserve(400).ok());  // fits, and is released at once
  EXPECT_EQ(budget.in_use(), 600u);
  {
    InflightBudget::Reservation moved = *std::move(a);
    EXPECT_EQ(budget.in_use(), 600u);  // moving does not release
  }
  EXPECT_EQ(budget.in_use(), 0u);
  EXPECT_TRUE(budget.Reserve(1000).ok());
}

TEST(InflightBudget, ZeroMeansNoLimit) {
  InflightBudget budget(0);
  absl::StatusOr<InflightBudget::Reservation> big = budget.Reserve(uint64_t{1} << 40);
  EXPECT_TRUE(big.ok());
}

TEST(InflightBudget, ConcurrentReservationsNeverPassTheLimit) {
  InflightBudget budget(10 * 100);
  std::atomic<uint64_t> peak{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        absl::StatusOr<InflightBudget::Reservation> r = budget.Reserve(100);
        if (!r.ok()) {
          refused++;
          continue;
        }
        uint64_t now = budget.in_use();
        uint64_t seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), 1000u);
  EXPECT_EQ(budget.in_use(), 0u);
}

TEST(InflightBudget, HeldMemoryCountsPastTheLimitAndHoldsOffNewRequests) {
  InflightBudget budget(1000);
  absl::StatusOr<InflightBudget::Reservation> request = budget.Reserve(600);
  ASSERT_TRUE(request.ok());
  {
    // An answer of 700 bytes already computed: counted, never refused.
    InflightBudget::Reservation answer = budget.Hold(700);
    EXPECT_EQ(answer.bytes(), 700u);
    EXPECT_EQ(budget.in_use(), 1300u);
    absl::StatusOr<InflightBudget::Reservation> next = budget.Reserve(1);
    EXPECT_EQ(next.status().code(), absl::StatusCode::kResourceExhausted);
    *request = InflightBudget::Reservation();  // the request goes
    EXPECT_EQ(budget.in_use(), 700u);
    EXPECT_EQ(budget.Reserve(400).status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_TRUE(budget.Reserve(300).ok());
  }
  EXPECT_EQ(budget.in_use(), 0u);
  EXPECT_TRUE(budget.Reserve(1000).ok());
}

}  // namespace
}  // namespace infergate
