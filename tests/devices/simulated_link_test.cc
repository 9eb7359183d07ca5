#include "devices/simulated_link.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "devices/simulation.h"

namespace infergate {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// What a move costs alone: the fixed cost plus the bytes over the rate.
TEST(SimulatedLink, TransferTimeIsTheFixedCostPlusTheBytesOverTheRate) {
  struct Row {
    double bytes_per_second;
    int64_t per_move_us;
    uint64_t bytes;
    int64_t expected_us;
  };
  for (const Row& r :
       {Row{12e9, 2000, 0, 2000}, Row{12e9, 2000, 12'000'000'000, 1'002'000}, Row{12e9, 2000, 200'000'000, 18'667},
        Row{60e9, 500, 60'000'000, 1'500}, Row{0, 700, 1'000'000'000, 700}}) {
    SimulatedLink link(r.bytes_per_second, microseconds(r.per_move_us));
    EXPECT_EQ(link.TransferTime(r.bytes).count(), r.expected_us)
        << r.bytes << " bytes at " << r.bytes_per_second << " B/s + " << r.per_move_us << " us";
  }
}

// Moves booked together cross one after another, first come, first served:
// each ends one transfer after the one before it, and the queue a new move
// would wait for is what is booked ahead of it.
TEST(SimulatedLink, MovesBookedTogetherQueueBehindEachOther) {
  SimulatedLink link(1e9, microseconds(1000));  // 100 MB: 101 ms
  EXPECT_EQ(link.Queued().count(), 0) << "a fresh link is free";
  const auto before = SimulatedLink::Clock::now();
  const auto first = link.Book(100'000'000);
  const auto second = link.Book(100'000'000);
  const auto third = link.Book(0);
  EXPECT_EQ(std::chrono::duration_cast<microseconds>(second - first).count(), 101'000);
  EXPECT_EQ(std::chrono::duration_cast<microseconds>(third - second).count(), 1'000);
  EXPECT_GE(first - before, milliseconds(101));
  // Three moves ahead: a new one would wait until the third has ended.
  const microseconds queued = link.Queued();
  EXPECT_LE(queued, std::chrono::duration_cast<microseconds>(third - before));
  EXPECT_GT(queued, std::chrono::duration_cast<microseconds>(third - before) - milliseconds(100));
}

// Once every booked move has ended the link is free again: a move booked
// then is charged its own transfer only.
TEST(SimulatedLink, AnIdleLinkChargesAMoveItsTransferOnly) {
  SimulatedLink link(1e9, microseconds(0));
  const microseconds took = link.Move(5'000'000);  // 5 ms
  EXPECT_GE(took, milliseconds(5));
  EXPECT_EQ(link.Queued().count(), 0);
  const auto before = SimulatedLink::Clock::now();
  const auto end = link.Book(5'000'000);
  const auto after = SimulatedLink::Clock::now();
  EXPECT_GE(end - before, milliseconds(5));
  // Booked from a moment between the two readings: nothing was ahead of it
  // (exact, however long the machine took to make the call).
  EXPECT_LE(end - after, milliseconds(5)) << "nothing was ahead of it";
}

// Two loads onto one device at once share its link: the second's move takes
// its own transfer and the first's (the simulation before the link gave
// each the full bandwidth). Through SimulatedMove, as the loaders call it.
TEST(SimulatedLink, ConcurrentMovesOntoOneDeviceShareItsLink) {
  SimulationRules rules;
  rules.transfer_bytes_per_second = 1e9;
  rules.transfer_latency = microseconds(0);
  rules.link = std::make_shared<SimulatedLink>(rules.transfer_bytes_per_second, rules.transfer_latency);
  std::vector<microseconds> took(2);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> moves;
  for (int i = 0; i < 2; ++i) moves.emplace_back([&, i] { took[i] = SimulatedMove(rules, 150'000'000); });  // 150 ms
  for (auto& t : moves) t.join();
  const auto wall = std::chrono::steady_clock::now() - start;
  EXPECT_GE(wall, milliseconds(300)) << "the two moves crossed the link at once";
  const microseconds longer = std::max(took[0], took[1]);
  const microseconds shorter = std::min(took[0], took[1]);
  // The later one waited for most of the earlier (alone it takes 150 ms;
  // the threads start a little apart).
  EXPECT_GE(longer, milliseconds(250)) << "the later move did not wait for the earlier";
  EXPECT_GE(shorter, milliseconds(150));
  // A device without a link (rules a test made by hand) charges each alone.
  SimulationRules alone = rules;
  alone.link = nullptr;
  EXPECT_EQ(SimulatedLinkQueue(alone).count(), 0);
  EXPECT_EQ(SimulatedMove(alone, 10'000'000), milliseconds(10));
}

}  // namespace
}  // namespace infergate
