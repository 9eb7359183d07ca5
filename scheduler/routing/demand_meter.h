#pragma once
// Each model's demand: requests per second, as an exponentially decaying
// rate with a time constant of `window` (the move policy's input,
// move_policy.h). A burst raises it at once; a model nobody asks for decays
// to zero in a few windows, without a timer: the rate is decayed to the
// moment it is read or updated.
//
// Threading: thread-safe; each call is one short lock. Ownership: plain
// data, no threads.

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace infergate {

class DemandMeter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit DemandMeter(std::chrono::milliseconds window = std::chrono::seconds(10)) : window_(window) {}

  // `requests` more for `model` at `now`.
  void Add(const std::string& model, double requests, Clock::time_point now);
  // Requests per second for `model` at `now` (0 for one never seen).
  double Rate(const std::string& model, Clock::time_point now) const;
  // Every model's rate at `now`, largest first; models whose rate fell
  // under `forget_below` are dropped from the meter.
  std::vector<std::pair<std::string, double>> Rates(Clock::time_point now, double forget_below = 1e-3);

 private:
  struct Entry {
    double rate = 0;  // per second, as of `at`
    Clock::time_point at;
  };
  double Decayed(const Entry& e, Clock::time_point now) const;

  const std::chrono::milliseconds window_;
  mutable Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infergate
