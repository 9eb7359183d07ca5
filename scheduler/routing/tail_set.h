#pragma once
// The move policy's p99 objective (move_policy.h MoveObjective::kTailSet):
// which models must be on the accelerator for the fewest requests to be
// slow, as the churn benchmark's placement bound computes it over a phase
// (bench/placement_bound.py), here over the demand measured now. A pure
// function, tested as a table (tests/scheduler/routing/tail_set_test.cc).
//
// A request is slow when it takes longer than a threshold T. Off the
// accelerator a model's request takes OffAcceleratorUs (the faster of its
// copy elsewhere and, where the rule allows it, loading it and running
// there); on it, accelerator_us. For each T, from the lowest:
//  1. The models whose requests are slow off the accelerator and not on
//     it (demand > 0, off > T >= accelerator) want to be on it; those slow
//     even on it (accelerator > T) are slow wherever they are.
//  2. Up to `tail_share` of the demand may be slow: the slow-anywhere
//     models' demand first, then wanting models left off, those with the
//     most bytes per request first.
//  3. T is feasible when the wanting models not left off fit the budget
//     (pinned copies, resident whatever the policy says, hold theirs).
// The answer is the lowest feasible T's set (empty when none is wanted
// even at the highest T). The estimates are means, not distributions: a
// model is on one side of T or the other, so the set is as good as the
// means; the demand is the meter's, so a rarely asked model may be missed
// for a window.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "scheduler/routing/move_policy.h"

namespace infergate {

// What a request for `model` takes when the model is not on the
// accelerator: its copy elsewhere, or loading it there and running (when
// `load_and_run_us` is set), the faster.
double OffAcceleratorUs(const MoveCandidate& model);

struct TailSet {
  double threshold_us = 0;       // the lowest feasible T
  std::set<std::string> models;  // the models that must be on the accelerator for it
};

// The models that must be on the accelerator (whose policy budget is
// `budget_bytes`) for at most `tail_share` (0..1) of the demand to be slower
// than the lowest threshold the budget allows.
TailSet ChooseTailSet(const std::vector<MoveCandidate>& models, uint64_t budget_bytes, double tail_share);

}  // namespace infergate
