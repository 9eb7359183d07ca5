// The move policy as one table: measured demand, times and sizes in, the
// promotion (and what it displaces) out.
#include "scheduler/routing/move_policy.h"

#include <gtest/gtest.h>

#include "tests/scheduler/routing/move_candidate_rows.h"

namespace infergate {
namespace {

// A model: demand (req/s), ms on the accelerator, ms elsewhere, transfer
// ms, MiB, resident, seconds resident.
MoveCandidate M(const std::string& name, double rps, double gpu_ms, double cpu_ms, double transfer_ms, uint64_t mib,
                bool resident = false, double resident_for_s = 60) {
  MoveCandidate m = CandidateRow(name, rps, gpu_ms, cpu_ms, mib);
  m.transfer_us = transfer_ms * 1000;
  m.resident = resident;
  m.resident_for_s = resident_for_s;
  return m;
}

MoveCandidate Pinned(MoveCandidate m) {
  m.pinned = true;
  return m;
}

// Resident because a request loaded and ran it (the staging share), `for_s` ago.
MoveCandidate Staged(MoveCandidate m, double for_s = 0.5) {
  m.resident = true;
  m.resident_for_s = for_s;
  m.staged = true;
  return m;
}

// Decides on `in`: the promotion and demotions a row expects, and a
// promotion's gain past the hysteresis times its cost.
void ExpectDecision(const MoveInputs& in, const char* what, const std::string& promote,
                    const std::vector<std::string>& demote) {
  const MoveDecision d = DecideMoves(in);
  EXPECT_EQ(d.promote, promote) << what;
  EXPECT_EQ(d.demote, demote) << what;
  if (!d.promote.empty()) {
    EXPECT_GT(d.gain_us, in.hysteresis * d.cost_us) << what;
  }
}

struct Row {
  const char* what;
  std::vector<MoveCandidate> models;
  uint64_t budget_mib;
  std::string promote;
  std::vector<std::string> demote;
};

TEST(MovePolicy, Table) {
  // clang-format off: a table, one row a line
  const std::vector<Row> rows = {
      {"room free, demand pays the transfer: promote",
       {M("a", 10, 1, 20, 50, 100)}, 1000, "a", {}},
      {"no demand: stay",
       {M("a", 0, 1, 20, 50, 100)}, 1000, "", {}},
      {"not faster on the accelerator: stay",
       {M("a", 50, 20, 20, 50, 100)}, 1000, "", {}},
      {"gain below hysteresis x transfer: stay (0.3 rps x 10 s x 19 ms = 57 ms < 1.5 x 50 ms)",
       {M("a", 0.3, 1, 20, 50, 100)}, 1000, "", {}},
      {"larger than the whole budget: never",
       {M("a", 100, 1, 20, 50, 2000)}, 1000, "", {}},
      {"full: displace the smallest gain when the newcomer gains far more",
       {M("hot", 50, 1, 20, 100, 400), M("cold", 1, 1, 20, 100, 400, true), M("warm", 20, 1, 20, 100, 400, true)},
       800, "hot", {"cold"}},
      {"full: a newcomer of like demand does not displace (hysteresis: no swapping back and forth)",
       {M("b", 10, 1, 20, 100, 400), M("a", 10, 1, 20, 100, 400, true), M("c", 10, 1, 20, 100, 400, true)},
       800, "", {}},
      {"full: models that just moved are not displaced",
       {M("hot", 50, 1, 20, 100, 400), M("cold", 1, 1, 20, 100, 400, true, 1), M("warm", 20, 1, 20, 100, 400, true, 2)},
       800, "", {}},
      {"several candidates: the largest margin wins, one per decision",
       {M("x", 10, 1, 20, 50, 100), M("y", 40, 1, 20, 50, 100), M("z", 20, 1, 20, 50, 100)}, 1000, "y", {}},
      {"displacing two small ones for one large one",
       {M("big", 100, 1, 30, 200, 600), M("s1", 1, 1, 5, 10, 300, true), M("s2", 2, 1, 5, 10, 300, true),
        M("s3", 50, 1, 5, 10, 300, true)},
       1000, "big", {"s1", "s2"}},
      {"full: a pinned model is never displaced, however little it gains",
       {M("hot", 50, 1, 20, 100, 400), Pinned(M("cold", 0, 1, 20, 100, 400, true))}, 400, "", {}},
      {"resident models are never promoted again",
       {M("a", 100, 1, 20, 50, 100, true)}, 1000, "", {}},
      {"room for one of two that save about as much time: the one whose requests are slower (the tail) wins "
       "(slow saves 1 rps x 60 ms, quick 7 rps x 10 ms)",
       {M("quick", 7, 2, 12, 10, 200), M("slow", 1, 20, 80, 10, 200)}, 200, "slow", {}},
      {"full of quick requests: a slow model displaces a quick one that saves more time, unweighed",
       {M("slow", 1, 20, 80, 10, 200), M("quick", 7, 2, 12, 10, 200, true)}, 200, "slow", {"quick"}},
      {"over the budget and nothing it may trim (pinned, or just moved): no decision",
       {Pinned(M("p", 1, 1, 20, 100, 400, true)), M("a", 1, 1, 20, 100, 400, true, 1)}, 400, "", {}},
      {"no staging share: a copy a request loaded counts in the one budget and is displaced however new",
       {M("hot", 50, 1, 20, 100, 400), Staged(M("s", 1, 1, 20, 100, 400))}, 400, "hot", {"s"}},
  };
  // clang-format on
  for (const Row& row : rows) {
    MoveInputs in;
    in.budget_bytes = row.budget_mib * kCandidateMiB;
    in.models = row.models;
    ExpectDecision(in, row.what, row.promote, row.demote);
  }
}

// The staging share: the policy's budget below the device's. The copies
// requests staged hold none of the policy's budget and stay in the rest
// until a load needs their room; a promotion displaces placed copies for
// the policy's budget and staged ones only for the device's.
struct StagingRow {
  const char* what;
  std::vector<MoveCandidate> models;
  uint64_t policy_mib;
  uint64_t device_mib;
  std::string promote;
  std::vector<std::string> demote;
};

TEST(MovePolicy, StagingShareTable) {
  // clang-format off: a table, one row a line
  const std::vector<StagingRow> rows = {
      {"a staged copy in the staging room stays, however little it gains (a load takes its room back, not a pass)",
       {M("a", 20, 1, 20, 100, 400, true), Staged(M("s", 1, 1, 20, 100, 400))}, 400, 800, "", {}},
      {"a staged copy that gains more than a placed one stays beside it: neither goes",
       {M("a", 1, 1, 20, 100, 400, true), Staged(M("s", 20, 1, 20, 100, 400))}, 400, 800, "", {}},
      {"placed copies over the policy's budget: the settled one that gains least goes, no staged one for it",
       {M("a", 1, 1, 20, 100, 200, true), M("b", 9, 1, 20, 100, 400, true), Staged(M("s", 0.5, 1, 20, 100, 200))},
       400, 800, "", {"a"}},
      {"every copy over the device's budget: the smallest gains go, a staged copy however new",
       {M("a", 20, 1, 20, 100, 200, true), Staged(M("s1", 1, 1, 20, 100, 200)), Staged(M("s2", 2, 1, 20, 100, 200)),
        Staged(M("s3", 3, 1, 20, 100, 200))}, 400, 600, "", {"s1"}},
      {"a promotion displaces a placed copy for the policy's budget, not the staged one that gains less",
       {M("hot", 50, 1, 20, 100, 400), M("a", 1, 1, 20, 100, 400, true), Staged(M("s", 0.5, 1, 20, 100, 400))},
       400, 800, "hot", {"a"}},
      {"a promotion with room in the policy's budget takes the device's room from staged copies, however new",
       {M("hot", 50, 1, 20, 100, 200), M("a", 20, 1, 20, 100, 200, true), Staged(M("s1", 1, 1, 20, 100, 400)),
        Staged(M("s2", 2, 1, 20, 100, 200))}, 400, 800, "hot", {"s1"}},
      {"a placed copy within its minimum residence is not displaced for the policy's budget: no promotion",
       {M("hot", 50, 1, 20, 100, 400), M("a", 1, 1, 20, 100, 400, true, 1), Staged(M("s", 0.5, 1, 20, 100, 400))},
       400, 800, "", {}},
  };
  // clang-format on
  for (const StagingRow& row : rows) {
    MoveInputs in;
    in.budget_bytes = row.policy_mib * kCandidateMiB;
    in.device_budget_bytes = row.device_mib * kCandidateMiB;
    in.models = row.models;
    ExpectDecision(in, row.what, row.promote, row.demote);
  }
}

// The mean objective leaves the savings unweighed: of the two that save
// about as much time, the one that saves more wins, however quick its
// requests are (the rows the tail objective decides the other way above).
TEST(MovePolicy, TheMeanObjectiveWeighsOnlyTheTimeSaved) {
  MoveInputs in;
  in.objective = MoveObjective::kMean;
  in.budget_bytes = 200 * kCandidateMiB;
  in.models = {M("quick", 7, 2, 12, 10, 200), M("slow", 1, 20, 80, 10, 200)};
  EXPECT_EQ(DecideMoves(in).promote, "quick");
  in.models = {M("slow", 1, 20, 80, 10, 200), M("quick", 7, 2, 12, 10, 200, true)};
  EXPECT_EQ(DecideMoves(in).promote, "");
  in.objective = MoveObjective::kTail;
  EXPECT_EQ(DecideMoves(in).promote, "slow");
}

// The decision does not depend on the order the models are listed in.
TEST(MovePolicy, OrderOfTheListDoesNotMatter) {
  MoveInputs in;
  in.budget_bytes = 800 * kCandidateMiB;
  in.models = {M("hot", 50, 1, 20, 100, 400), M("cold", 1, 1, 20, 100, 400, true),
               M("cold2", 1, 1, 20, 100, 400, true)};
  const MoveDecision first = DecideMoves(in);
  std::swap(in.models[1], in.models[2]);
  std::swap(in.models[0], in.models[1]);
  EXPECT_EQ(DecideMoves(in), first);
  EXPECT_EQ(first.promote, "hot");
  EXPECT_EQ(first.demote, std::vector<std::string>{"cold"});
}

TEST(MovePolicy, GainIsDemandTimesWindowTimesTheTimeSavedWeighedByTheRequestsLatency) {
  // Its latency, (20 + 1) / 2 ms, is the reference: weight 1.
  EXPECT_DOUBLE_EQ(AcceleratorGain(M("a", 10, 1, 20, 0, 1), 10, 10500), 10 * 10 * 19000.0);
  // Twice the reference: twice the gain.
  EXPECT_DOUBLE_EQ(AcceleratorGain(M("a", 10, 1, 20, 0, 1), 10, 5250), 2 * 10 * 10 * 19000.0);
  EXPECT_DOUBLE_EQ(AcceleratorGain(M("a", 10, 30, 20, 0, 1), 10, 10500), 0);
  // No reference (the mean objective): unweighed.
  EXPECT_DOUBLE_EQ(AcceleratorGain(M("a", 10, 1, 20, 0, 1), 10, 0), 10 * 10 * 19000.0);
}

TEST(MovePolicy, ReferenceLatencyIsTheDemandWeighedMeanLatency) {
  // a: 3 rps at (20 + 2) / 2 = 11 ms; b: 1 rps at (8 + 2) / 2 = 5 ms; c: no demand.
  EXPECT_DOUBLE_EQ(ReferenceLatency({M("a", 3, 2, 20, 0, 1), M("b", 1, 2, 8, 0, 1), M("c", 0, 1, 100, 0, 1)}),
                   (3 * 11000.0 + 1 * 5000.0) / 4);
  EXPECT_DOUBLE_EQ(ReferenceLatency({M("c", 0, 1, 100, 0, 1)}), 0);
}

}  // namespace
}  // namespace infergate
