// The intake gate: reads wait in line for room in the budget, first come
// first served; a connection of small messages takes the fast lane; the
// line is bounded; a read's room becomes its message's size.
#include "service/intake_gate.h"

#include <gtest/gtest.h>

#include <vector>

namespace infergate {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(IntakeGate, ReadsWaitForRoomFirstComeFirstServed) {
  InflightBudget budget(100 * kMiB);
  IntakeGate gate(&budget, 32 * kMiB, 8);
  EXPECT_EQ(gate.room_bytes(), 32 * kMiB);
  int a, b, c, d;
  IntakeGate::Ticket ta, tb, tc, td;
  EXPECT_EQ(gate.Enter(&a, "peer-a", &ta), IntakeGate::Turn::kAdmitted);
  EXPECT_EQ(gate.Enter(&b, "peer-b", &tb), IntakeGate::Turn::kAdmitted);
  EXPECT_EQ(gate.Enter(&c, "peer-c", &tc), IntakeGate::Turn::kAdmitted);
  EXPECT_EQ(budget.in_use(), 96 * kMiB);
  // No room for a fourth 32 MiB read: in line.
  EXPECT_EQ(gate.Enter(&d, "peer-d", &td), IntakeGate::Turn::kWait);
  int e;
  IntakeGate::Ticket te;
  EXPECT_EQ(gate.Enter(&e, "peer-e", &te), IntakeGate::Turn::kWait);
  EXPECT_EQ(gate.waiting(), 2u);
  // The first message was 24 MiB: its room shrinks, 8 MiB come back; still
  // no room for d.
  ASSERT_TRUE(gate.Read("peer-a", 24 * kMiB, &ta).ok());
  EXPECT_EQ(ta.room().bytes(), 24 * kMiB);
  EXPECT_EQ(gate.Retry(&d, &td), IntakeGate::Turn::kWait);
  tb = IntakeGate::Ticket();  // b's call ended
  // e may not pass d.
  EXPECT_EQ(gate.Retry(&e, &te), IntakeGate::Turn::kWait);
  EXPECT_EQ(gate.Retry(&d, &td), IntakeGate::Turn::kAdmitted);
  EXPECT_EQ(gate.waiting(), 1u);
  gate.Leave(&e);
  EXPECT_EQ(gate.waiting(), 0u);
}

TEST(IntakeGate, TheLineIsBoundedAndRefusesByName) {
  InflightBudget budget(10 * kMiB);
  IntakeGate gate(&budget, 64 * kMiB, 2);
  EXPECT_EQ(gate.room_bytes(), 10 * kMiB) << "no room larger than the budget";
  int a, b, c, d;
  IntakeGate::Ticket ta, tb, tc, td;
  EXPECT_EQ(gate.Enter(&a, "p", &ta), IntakeGate::Turn::kAdmitted);
  EXPECT_EQ(gate.Enter(&b, "p", &tb), IntakeGate::Turn::kWait);
  EXPECT_EQ(gate.Enter(&c, "p", &tc), IntakeGate::Turn::kWait);
  EXPECT_EQ(gate.Enter(&d, "p", &td), IntakeGate::Turn::kRefused);
  EXPECT_EQ(gate.Refusal().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(gate.Refusal().message().find("--max-inflight-bytes"), std::string::npos);
}

// A connection whose messages were small reads its next without waiting
// behind a line of large ones; one that grows past its room is charged in
// full, or refused when that does not fit.
TEST(IntakeGate, SmallMessagesTakeTheFastLane) {
  InflightBudget budget(100 * kMiB);
  IntakeGate gate(&budget, 32 * kMiB, 8);
  int big1, big2, big3, big4, small;
  IntakeGate::Ticket t1, t2, t3, t4, ts;
  ASSERT_EQ(gate.Enter(&big1, "big", &t1), IntakeGate::Turn::kAdmitted);
  ASSERT_EQ(gate.Enter(&big2, "big", &t2), IntakeGate::Turn::kAdmitted);
  ASSERT_EQ(gate.Enter(&big3, "big", &t3), IntakeGate::Turn::kAdmitted);
  ASSERT_EQ(gate.Enter(&big4, "big", &t4), IntakeGate::Turn::kWait);
  // Unknown so far: it waits like any other.
  ASSERT_EQ(gate.Enter(&small, "small", &ts), IntakeGate::Turn::kWait);
  gate.Leave(&small);
  // Once it has sent a small message, it passes the line.
  {
    IntakeGate::Ticket first;
    t1 = IntakeGate::Ticket();
    gate.Leave(&big4);
    ASSERT_EQ(gate.Enter(&small, "small", &first), IntakeGate::Turn::kAdmitted);
    ASSERT_TRUE(gate.Read("small", 1000, &first).ok());
  }
  ASSERT_EQ(gate.Enter(&big4, "big", &t4), IntakeGate::Turn::kAdmitted);
  ASSERT_EQ(gate.Enter(&big1, "big", &t1), IntakeGate::Turn::kWait);
  ASSERT_EQ(gate.Enter(&small, "small", &ts), IntakeGate::Turn::kAdmitted) << "small passes the line";
  EXPECT_EQ(ts.room().bytes(), uint64_t{64} << 10);
  // It sent more than its room: charged in full while the budget allows...
  ASSERT_TRUE(gate.Read("small", 2 * kMiB, &ts).ok());
  EXPECT_EQ(ts.room().bytes(), 2 * kMiB);
}

// A fast read that turns out larger than the budget has room for is
// refused once read (RESOURCE_EXHAUSTED), its room given back.
TEST(IntakeGate, AFastReadThatOutgrowsTheBudgetIsRefused) {
  InflightBudget budget(10 * kMiB);
  IntakeGate gate(&budget, 32 * kMiB, 8);
  {
    IntakeGate::Ticket first;
    int w;
    ASSERT_EQ(gate.Enter(&w, "small", &first), IntakeGate::Turn::kAdmitted);
    ASSERT_TRUE(gate.Read("small", 100, &first).ok());
  }
  absl::StatusOr<InflightBudget::Reservation> hold = budget.Reserve(9 * kMiB + kMiB / 2);
  ASSERT_TRUE(hold.ok());
  IntakeGate::Ticket t;
  int w;
  ASSERT_EQ(gate.Enter(&w, "small", &t), IntakeGate::Turn::kAdmitted);
  const absl::Status grew = gate.Read("small", 2 * kMiB, &t);
  EXPECT_EQ(grew.code(), absl::StatusCode::kResourceExhausted) << grew;
  t = IntakeGate::Ticket();
  EXPECT_EQ(budget.in_use(), 9 * kMiB + kMiB / 2);
}

TEST(IntakeGate, FastReadsAreFewAtOnce) {
  InflightBudget budget(1000 * kMiB);
  IntakeGate gate(&budget, 32 * kMiB, 8);
  {
    IntakeGate::Ticket t;
    int w;
    ASSERT_EQ(gate.Enter(&w, "small", &t), IntakeGate::Turn::kAdmitted);
    ASSERT_TRUE(gate.Read("small", 100, &t).ok());
  }
  // Fill the budget so that only the fast lane could admit.
  IntakeGate::Ticket hold;
  int h;
  ASSERT_EQ(gate.Enter(&h, "other", &hold), IntakeGate::Turn::kAdmitted);
  absl::StatusOr<InflightBudget::Reservation> rest = budget.Reserve(budget.limit() - budget.in_use() - 10 * kMiB);
  ASSERT_TRUE(rest.ok());
  std::vector<IntakeGate::Ticket> fast(IntakeGate::kMaxFastReads + 1);
  int waiters[IntakeGate::kMaxFastReads + 1];
  for (int i = 0; i < IntakeGate::kMaxFastReads; ++i) {
    EXPECT_EQ(gate.Enter(&waiters[i], "small", &fast[i]), IntakeGate::Turn::kAdmitted) << i;
  }
  EXPECT_EQ(gate.Enter(&waiters[IntakeGate::kMaxFastReads], "small", &fast[IntakeGate::kMaxFastReads]),
            IntakeGate::Turn::kWait);
  gate.Leave(&waiters[IntakeGate::kMaxFastReads]);
  // A read that ends gives its slot back.
  ASSERT_TRUE(gate.Read("small", 100, &fast[0]).ok());
  EXPECT_EQ(gate.Enter(&waiters[IntakeGate::kMaxFastReads], "small", &fast[IntakeGate::kMaxFastReads]),
            IntakeGate::Turn::kAdmitted);
}

TEST(IntakeGate, WithoutALimitEveryReadPasses) {
  InflightBudget unlimited(0);
  IntakeGate gate(&unlimited, 32 * kMiB, 1);
  int a, b;
  IntakeGate::Ticket ta, tb;
  EXPECT_EQ(gate.Enter(&a, "p", &ta), IntakeGate::Turn::kAdmitted);
  EXPECT_EQ(gate.Enter(&b, "p", &tb), IntakeGate::Turn::kAdmitted);
  EXPECT_TRUE(gate.Read("p", 64 * kMiB, &ta).ok());
}

}  // namespace
}  // namespace infergate
