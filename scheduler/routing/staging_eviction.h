#pragma once
// Which staged copies a request's load onto an accelerator evicts first (the
// staging share, move_policy.h and core_parts.h MakeStagingRoom): a pure
// function from each idle staged copy's recent demand and last use to the
// order, so the rule reads (and is tested) as one table.
//
//  1. The copy whose model was asked for least over the recent window goes
//     first: the staged copies are the accelerator's short-term working
//     set, and a model asked for often in the last seconds is the one whose
//     eviction would be paid for by the next load soonest.
//  2. Equal demand (none measured, the window off, or two models equally
//     asked for): the least recently used first.
//
// Why not the least recently used alone: one request for a cold model makes
// it the most recently used, and the copy a popular model's next request
// wants is evicted in its place. Replayed over the churn benchmark's arrivals
// (bench/bytes_replay.py on bench/results/churn-20261205T112926Z, three
// seeds, a cache of a third of the models' bytes), an order by demand over
// 2 s moved 45-47.5 GB a minute against 50-55 GB for the least recently
// used; over the move policy's 10 s window, as much as the least recently
// used (the popular set had moved on). docs/devices-and-precision.md.
//
// Threading and ownership: plain data in and out; no state.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace infergate {

struct StagedCopy {
  std::string model;
  double recent_demand_per_second = 0;  // its requests over the staging demand window
  uint64_t last_used = 0;               // the order of its latest use (larger: later)
};

// The indices of `copies` in the order a load evicts them (first: first
// out).
std::vector<size_t> StagedEvictionOrder(const std::vector<StagedCopy>& copies);

}  // namespace infergate
