// The intake gate: a read starts only with room for it in the budget; calls
// wait in line for it, first come first served; connections of small
// messages take the fast lane; a read's room becomes its message's size.
#include "service/call/intake_gate.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace infergate {
namespace {

constexpr uint64_t kMiB = 1 << 20;
using Turn = IntakeGate::Turn;

// Marks `peer` as a connection of large messages, as a read of one does.
void SendLarge(IntakeGate& gate, const std::string& peer, uint64_t bytes = 24 * kMiB) {
  IntakeGate::Ticket t;
  int w = 0;
  ASSERT_EQ(gate.Enter(&w, peer, &t), Turn::kAdmitted);
  ASSERT_TRUE(gate.Read(peer, bytes, &t).ok());
}

// A connection of large messages needs room for the largest allowed, and
// waits for it in line, first come first served; once its message is in,
// its room is the message's size.
TEST(IntakeGate, LargeReadsWaitForRoomFirstComeFirstServed) {
  InflightBudget budget(100 * kMiB);
  IntakeGate gate(&budget, 32 * kMiB, 8);
  EXPECT_EQ(gate.room_bytes(), 32 * kMiB);
  SendLarge(gate, "big");
  EXPECT_EQ(budget.in_use(), 0u);
  int a = 0, b = 0, c = 0, d = 0, e = 0;
  IntakeGate::Ticket ta, tb, tc, td, te;
  EXPECT_EQ(gate.Enter(&a, "big", &ta), Turn::kAdmitted);
  EXPECT_EQ(gate.Enter(&b, "big", &tb), Turn::kAdmitted);
  EXPECT_EQ(gate.Enter(&c, "big", &tc), Turn::kAdmitted);
  EXPECT_EQ(budget.in_use(), 96 * kMiB);
  EXPECT_EQ(gate.Enter(&d, "big", &td), Turn::kWait) << "4 MiB free, 32 MiB needed";
  EXPECT_EQ(gate.Enter(&e, "big", &te), Turn::kWait);
  EXPECT_EQ(gate.waiting(), 2u);
  // The first message was 24 MiB: its room shrinks, 8 MiB come back.
  ASSERT_TRUE(gate.Read("big", 24 * kMiB, &ta).ok());
  EXPECT_EQ(ta.room().bytes(), 24 * kMiB);
  EXPECT_EQ(gate.Retry(&d, "big", &td), Turn::kWait) << "12 MiB free";
  tb = IntakeGate::Ticket();  // that call ended
  EXPECT_EQ(gate.Retry(&e, "big", &te), Turn::kWait) << "e may not pass d";
  EXPECT_EQ(gate.Retry(&d, "big", &td), Turn::kAdmitted);
  EXPECT_EQ(gate.waiting(), 1u);
  gate.Leave(&e);
  EXPECT_EQ(gate.waiting(), 0u);
}

TEST(IntakeGate, TheLineIsBoundedAndNoRoomLargerThanTheBudget) {
  InflightBudget budget(10 * kMiB);
  IntakeGate gate(&budget, 64 * kMiB, 2);
  EXPECT_EQ(gate.room_bytes(), 10 * kMiB);
  SendLarge(gate, "p", 8 * kMiB);
  int a = 0, b = 0, c = 0, d = 0;
  IntakeGate::Ticket ta, tb, tc, td;
  EXPECT_EQ(gate.Enter(&a, "p", &ta), Turn::kAdmitted);
  EXPECT_EQ(gate.Enter(&b, "p", &tb), Turn::kWait);
  EXPECT_EQ(gate.Enter(&c, "p", &tc), Turn::kWait);
  EXPECT_EQ(gate.Enter(&d, "p", &td), Turn::kRefused);
  EXPECT_EQ(gate.Refusal().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(gate.Refusal().message().find("--max-inflight-bytes"), std::string::npos);
}

// A new connection, and one whose messages were small, read their next
// without waiting behind a line of large ones; one that grows past its
// room is charged in full; one that sent a large message leaves the lane.
TEST(IntakeGate, SmallMessagesTakeTheFastLane) {
  InflightBudget budget(100 * kMiB);
  IntakeGate gate(&budget, 32 * kMiB, 8);
  SendLarge(gate, "big");
  int w1 = 0, w2 = 0, w3 = 0, w4 = 0, ws = 0;
  IntakeGate::Ticket t1, t2, t3, t4, small;
  ASSERT_EQ(gate.Enter(&w1, "big", &t1), Turn::kAdmitted);
  ASSERT_EQ(gate.Enter(&w2, "big", &t2), Turn::kAdmitted);
  ASSERT_EQ(gate.Enter(&w3, "big", &t3), Turn::kAdmitted);
  ASSERT_EQ(gate.Enter(&w4, "big", &t4), Turn::kWait);
  // New: presumed small, 64 KiB of room, past the line.
  ASSERT_EQ(gate.Enter(&ws, "small", &small), Turn::kAdmitted);
  EXPECT_EQ(small.room().bytes(), uint64_t{64} << 10);
  ASSERT_TRUE(gate.Read("small", 100000, &small).ok());
  EXPECT_EQ(small.room().bytes(), 100000u) << "charged in full once it grew past its room";
  small = IntakeGate::Ticket();
  // Known small now: twice its largest.
  ASSERT_EQ(gate.Enter(&ws, "small", &small), Turn::kAdmitted);
  EXPECT_EQ(small.room().bytes(), 200000u);
  ASSERT_TRUE(gate.Read("small", 1000, &small).ok());
  EXPECT_EQ(small.room().bytes(), 1000u);
  EXPECT_EQ(gate.Retry(&w4, "big", &t4), Turn::kWait) << "the large connection stays in line";
  gate.Leave(&w4);
  // A connection that sent a large message leaves the fast lane.
  t1 = IntakeGate::Ticket();
  SendLarge(gate, "small");
  ASSERT_EQ(gate.Enter(&w1, "big", &t1), Turn::kAdmitted);
  IntakeGate::Ticket t5;
  EXPECT_EQ(gate.Enter(&ws, "small", &t5), Turn::kWait);
  gate.Leave(&ws);
}

// A fast read that turns out larger than the budget has room for is
// refused once read (RESOURCE_EXHAUSTED), its room given back.
TEST(IntakeGate, AFastReadThatOutgrowsTheBudgetIsRefused) {
  InflightBudget budget(10 * kMiB);
  IntakeGate gate(&budget, 32 * kMiB, 8);
  absl::StatusOr<InflightBudget::Reservation> hold = budget.Reserve(9 * kMiB + kMiB / 2);
  ASSERT_TRUE(hold.ok());
  IntakeGate::Ticket t;
  int w = 0;
  ASSERT_EQ(gate.Enter(&w, "new", &t), Turn::kAdmitted);
  const absl::Status grew = gate.Read("new", 2 * kMiB, &t);
  EXPECT_EQ(grew.code(), absl::StatusCode::kResourceExhausted) << grew;
  t = IntakeGate::Ticket();
  EXPECT_EQ(budget.in_use(), 9 * kMiB + kMiB / 2);
}

// At most kMaxFastReads fast reads of known connections and kMaxNewReads
// of new ones at once: what the budget may be passed by is bounded; a
// known connection of small messages in line still passes when a slot frees.
TEST(IntakeGate, FastReadsAreFewAtOnce) {
  InflightBudget budget(1000 * kMiB);
  IntakeGate gate(&budget, 32 * kMiB, 8);
  {
    IntakeGate::Ticket t;
    int w = 0;
    ASSERT_EQ(gate.Enter(&w, "small", &t), Turn::kAdmitted);
    ASSERT_TRUE(gate.Read("small", 100, &t).ok());
  }
  absl::StatusOr<InflightBudget::Reservation> rest = budget.Reserve(budget.limit() - 10 * kMiB);
  ASSERT_TRUE(rest.ok());
  std::vector<IntakeGate::Ticket> fast(IntakeGate::kMaxFastReads + 1);
  int waiters[IntakeGate::kMaxFastReads + 1] = {};
  for (int i = 0; i < IntakeGate::kMaxFastReads; ++i) {
    EXPECT_EQ(gate.Enter(&waiters[i], "small", &fast[i]), Turn::kAdmitted) << i;
  }
  const int last = IntakeGate::kMaxFastReads;
  EXPECT_EQ(gate.Enter(&waiters[last], "small", &fast[last]), Turn::kWait);
  // A read that ends gives its slot back, to the one in line too.
  ASSERT_TRUE(gate.Read("small", 100, &fast[0]).ok());
  EXPECT_EQ(gate.Retry(&waiters[last], "small", &fast[last]), Turn::kAdmitted);
  EXPECT_EQ(gate.waiting(), 0u);
  // New connections have slots of their own, fewer.
  std::vector<IntakeGate::Ticket> fresh(IntakeGate::kMaxNewReads + 1);
  int fresh_waiters[IntakeGate::kMaxNewReads + 1] = {};
  for (int i = 0; i < IntakeGate::kMaxNewReads; ++i) {
    EXPECT_EQ(gate.Enter(&fresh_waiters[i], "new-" + std::to_string(i), &fresh[i]), Turn::kAdmitted) << i;
  }
  EXPECT_EQ(gate.Enter(&fresh_waiters[IntakeGate::kMaxNewReads], "new-x", &fresh[IntakeGate::kMaxNewReads]),
            Turn::kWait);
  gate.Leave(&fresh_waiters[IntakeGate::kMaxNewReads]);
}

TEST(IntakeGate, WithoutALimitEveryReadPasses) {
  InflightBudget unlimited(0);
  IntakeGate gate(&unlimited, 32 * kMiB, 1);
  int a = 0, b = 0;
  IntakeGate::Ticket ta, tb;
  EXPECT_EQ(gate.Enter(&a, "p", &ta), Turn::kAdmitted);
  EXPECT_EQ(gate.Enter(&b, "p", &tb), Turn::kAdmitted);
  EXPECT_TRUE(gate.Read("p", 64 * kMiB, &ta).ok());
}

}  // namespace
}  // namespace infergate
