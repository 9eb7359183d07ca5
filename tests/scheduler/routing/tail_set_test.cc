// The tail set as one table: demand, times and sizes in, the lowest
// threshold the budget allows and the models that must be on the
// accelerator for it out.
#include "scheduler/routing/tail_set.h"

#include <gtest/gtest.h>

#include "tests/scheduler/routing/move_candidate_rows.h"

namespace infergate {
namespace {

// A model: demand (req/s), ms on the accelerator, ms on its copy
// elsewhere, MiB; load and run ms (0: the rule does not allow it).
MoveCandidate Wanted(const std::string& name, double rps, double gpu_ms, double cpu_ms, uint64_t mib,
                     double load_and_run_ms = 0) {
  MoveCandidate m = CandidateRow(name, rps, gpu_ms, cpu_ms, mib);
  m.load_and_run_us = load_and_run_ms * 1000;
  return m;
}

MoveCandidate PinnedThere(MoveCandidate m) {
  m.pinned = true;
  m.resident = true;
  return m;
}

TEST(TailSet, Table) {
  struct TailRow {
    const char* what;
    std::vector<MoveCandidate> models;
    uint64_t budget_mib;
    double threshold_ms;
    std::set<std::string> set;
  };
  // clang-format off: a table, one row a line
  const std::vector<TailRow> rows = {
      {"no demand: nothing wanted", {Wanted("a", 0, 10, 40, 100)}, 100, 0, {}},
      {"both fit: the threshold is the slowest accelerator run, both wanted",
       {Wanted("a", 1, 10, 40, 100), Wanted("b", 1, 20, 80, 100)}, 200, 20, {"a", "b"}},
      {"room for one: the one slowest off it; the threshold is the other's time off it",
       {Wanted("a", 1, 10, 40, 100), Wanted("b", 1, 20, 80, 100)}, 100, 40, {"b"}},
      {"a model within the slack (1% of the demand) may stay slow: the rare one is left off, even its run on the "
       "accelerator past the threshold",
       {Wanted("common", 99, 10, 40, 100), Wanted("rare", 1, 20, 80, 100)}, 100, 10, {"common"}},
      {"past the slack: the rare one (2%) is not left off; room for one, the threshold its time off it",
       {Wanted("common", 98, 10, 40, 100), Wanted("rare", 2, 20, 80, 100)}, 100, 40, {"rare"}},
      {"a rare large model slow off it beats a popular one under the threshold (what tail weighing does not)",
       {Wanted("big", 0.4, 55, 220, 200), Wanted("mid", 2, 33, 130, 90)}, 200, 130, {"big"}},
      {"load and run bounds the time off it: the threshold is the other's load and run",
       {Wanted("big", 0.4, 55, 220, 200, 75), Wanted("mid", 2, 33, 130, 90, 45)}, 200, 55, {"big"}},
      {"a pinned copy there holds its bytes and is wanted by nobody",
       {PinnedThere(Wanted("p", 1, 10, 40, 100)), Wanted("a", 1, 10, 40, 100)}, 150, 40, {}},
  };
  // clang-format on
  for (const TailRow& row : rows) {
    SCOPED_TRACE(row.what);
    const TailSet set = ChooseTailSet(row.models, row.budget_mib * kCandidateMiB, 0.01);
    EXPECT_DOUBLE_EQ(set.threshold_us, row.threshold_ms * 1000);
    EXPECT_EQ(set.models, row.set);
  }
}

TEST(TailSet, TheTimeOffTheAcceleratorIsTheFasterPathTheRuleAllows) {
  EXPECT_DOUBLE_EQ(OffAcceleratorUs(Wanted("a", 1, 10, 40, 100)), 40'000);
  EXPECT_DOUBLE_EQ(OffAcceleratorUs(Wanted("a", 1, 10, 40, 100, 25)), 25'000);
  EXPECT_DOUBLE_EQ(OffAcceleratorUs(Wanted("a", 1, 10, 40, 100, 60)), 40'000);
}

// The objective in the policy: the same rare large model and popular one,
// the popular one on the accelerator and room for one. Weighing savings
// by latency keeps the popular one (it saves more); the tail set displaces
// it for the rare one, whose every request is otherwise past the lowest
// threshold the budget allows.
TEST(TailSet, TheTailSetObjectiveKeepsTheSetFirst) {
  MoveInputs in;
  in.budget_bytes = 200 * kCandidateMiB;
  MoveCandidate big = Wanted("big", 0.4, 55, 220, 200), mid = Wanted("mid", 2, 33, 130, 90);
  big.transfer_us = 20'000;
  mid.transfer_us = 10'000;
  mid.resident = true;
  mid.resident_for_s = 60;
  in.models = {big, mid};
  EXPECT_EQ(DecideMoves(in).promote, "") << "tail: mid saves more";
  in.objective = MoveObjective::kTailSet;
  const MoveDecision d = DecideMoves(in);
  EXPECT_EQ(d.promote, "big");
  EXPECT_EQ(d.demote, std::vector<std::string>{"mid"});
  // Once there, a model outside the set does not displace it, though
  // weighing savings would (mid at 3 rps saves more than big).
  big.resident = true;
  big.resident_for_s = 60;
  mid.resident = false;
  mid.demand_per_second = 3;
  in.models = {big, mid};
  ASSERT_EQ(ChooseTailSet(in.models, in.budget_bytes, in.tail_share).models, std::set<std::string>{"big"});
  EXPECT_EQ(DecideMoves(in).promote, "");
  in.objective = MoveObjective::kTail;
  EXPECT_EQ(DecideMoves(in).promote, "mid");
}

}  // namespace
}  // namespace infergate
