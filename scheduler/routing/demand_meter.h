#pragma once
// Each model's demand: requests per second, the move policy's input
// (move_policy.h). Two parts:
//
//  1. A rate that decays exponentially with a time constant of `window`:
//     steady demand settles at itself, and a model nobody asks for decays
//     to zero, without a timer (the rate is decayed to the moment it is
//     read or updated).
//  2. Change detection, so a step in demand is followed in seconds rather
//     than in several windows: two CUSUM tests on the arrivals, one for a
//     rate twice the current estimate and one for half of it (a sum of
//     log-likelihood ratios: each arrival adds ln 2 to the first and takes
//     it from the second; time spent adds the estimate's share to them in
//     the other direction, each floored at zero). When either sum passes
//     `change_threshold` plus ln(the rate per second) (evidence piles up
//     faster at a higher rate, and so would chance's: the term keeps false
//     alarms per second level) the estimate restarts from the rate counted
//     since that test last stood at zero, the change's estimated start,
//     over no less than `min_change_interval`, so a burst in one instant is
//     not an unbounded rate. Evidence in sooner than that interval gives a
//     provisional rate (the arrivals so far over the whole interval), and
//     the test keeps counting until the interval is complete, when the rate
//     is taken over the time counted. (Restarted at once, a steady high
//     rate, whose evidence is in within a fraction of the interval, was
//     read as the threshold's worth of arrivals per interval: 96 requests a
//     second as 15, over and over.) A threshold of 5 keeps false alarms to a few per
//     model per two minutes under steady Poisson demand and finds a halving
//     or doubling within a few seconds (tests/scheduler/routing/
//     demand_meter_test.cc); 0 turns detection off (the decaying rate
//     alone).
//
// Threading: thread-safe; each call is one short lock. Ownership: plain
// data, no threads.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace infergate {

class DemandMeter {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    std::chrono::milliseconds window{10000};
    double change_threshold = 5;  // 0: no change detection
    std::chrono::milliseconds min_change_interval{1000};
  };
  DemandMeter() : DemandMeter(Options{}) {}
  explicit DemandMeter(Options options) : options_(options) {}

  // `requests` more for `model` at `now`.
  void Add(const std::string& model, double requests, Clock::time_point now);
  // Requests per second for `model` at `now` (0 for one never seen).
  double Rate(const std::string& model, Clock::time_point now);
  // Every model's rate at `now`, largest first; models whose rate fell
  // under `forget_below` are dropped from the meter.
  std::vector<std::pair<std::string, double>> Rates(Clock::time_point now, double forget_below = 1e-3);
  // Changes detected since the meter was made, over every model.
  uint64_t changes() const;

 private:
  // One CUSUM test: its log-likelihood sum, and since when (and with how
  // many arrivals) it has been above zero.
  struct ChangeTest {
    double sum = 0;
    Clock::time_point since;
    double arrivals = 0;
    bool taken = false;  // passed within the minimum interval: its rate taken provisionally
    void Restart(Clock::time_point now);
  };
  struct Entry {
    double rate = 0;  // per second, as of `at`
    Clock::time_point at;
    ChangeTest rise;  // the rate doubled
    ChangeTest fall;  // the rate halved
  };
  // Brings `e` to `now`: the rate decayed, the tests given the time passed,
  // a change taken if one passed its threshold.
  void Advance(Entry& e, Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TakeChangeIfDetected(Entry& e, Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace infergate
