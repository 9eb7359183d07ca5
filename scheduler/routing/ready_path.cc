#include "scheduler/routing/ready_path.h"

#include <algorithm>

namespace infergate {
namespace {

// Path 2's estimate: the load and the wait for the request's turn on the
// device, in turn, or, with load on arrival, the longer of the two (the
// load runs while the request waits); then its run.
double LoadAndRunUs(const RouteCandidate& best, double load_us, const RouterOptions& options) {
  const double completion = ExpectedCompletionUs(best, options);
  if (!options.load_on_arrival) return load_us + completion;
  const double run = best.latency_us.value_or(options.unmeasured_latency_us);
  return std::max(load_us, completion - run) + run;
}

}  // namespace

PathChoice ChooseReadyPath(const std::vector<RouteCandidate>& candidates, int ideal, const RouterOptions& options) {
  PathChoice choice;
  if (ideal < 0 || ideal >= static_cast<int>(candidates.size())) return choice;
  const RouteCandidate& best = candidates[ideal];
  if (best.resident) return {ReadyPath::kIdeal, ideal, ExpectedCompletionUs(best, options), 0};
  // Path 1: the resident copy expected to finish first.
  int ready = -1;
  double ready_us = 0;
  for (int i = 0; i < static_cast<int>(candidates.size()); ++i) {
    if (!candidates[i].resident) continue;
    const double us = ExpectedCompletionUs(candidates[i], options);
    if (ready < 0 || us < ready_us) {
      ready = i;
      ready_us = us;
    }
  }
  // Path 2: load (or wait for the move) onto the best device, then run.
  const bool measured = best.load_us.has_value();
  const double load_us = measured ? LoadAndRunUs(best, *best.load_us, options) : 0;
  const double load_part = measured ? *best.load_us : 0;
  if (ready < 0) return {ReadyPath::kColdStart, ideal, load_us, 0, load_part};
  // The previous rule (options.load_and_run false) has path 1 alone.
  if (!options.load_and_run) return {ReadyPath::kResident, ready, ready_us, 0};
  if (measured && load_us < ready_us) return {ReadyPath::kLoadAndRun, ideal, load_us, ready_us, load_part};
  return {ReadyPath::kResident, ready, ready_us, load_us};
}

const char* ReadyPathName(ReadyPath path) {
  switch (path) {
    case ReadyPath::kIdeal: return "ideal";
    case ReadyPath::kResident: return "resident";
    case ReadyPath::kLoadAndRun: return "load_and_run";
    case ReadyPath::kColdStart: return "cold_start";
  }
  return "cold_start";
}

bool IsRegret(double expected_us, double took_us) {
  return expected_us > 0 && took_us > expected_us * (1 + kRegretMargin);
}

}  // namespace infergate
