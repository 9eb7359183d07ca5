#include "scheduler/routing/demand_meter.h"

#include <algorithm>
#include <cmath>

namespace infergate {
namespace {

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// ln(2): the log-likelihood ratio of one arrival for a rate twice the
// estimate (and, negated, for half of it).
constexpr double kLn2 = 0.69314718055994530942;

}  // namespace

void DemandMeter::ChangeTest::Restart(Clock::time_point now) {
  sum = 0;
  since = now;
  arrivals = 0;
  taken = false;
}

void DemandMeter::Advance(Entry& e, Clock::time_point now) {
  const double elapsed = Seconds(now - e.at);
  if (elapsed <= 0) return;
  const double estimate = e.rate;
  e.rate *= std::exp(-elapsed / Seconds(options_.window));
  e.at = now;
  if (options_.change_threshold <= 0) return;
  // Time without arrivals is evidence against a doubled rate (2r - r per
  // second) and for a halved one (r - r/2 per second).
  e.rise.sum -= estimate * elapsed;
  if (e.rise.sum <= 0) e.rise.Restart(now);
  e.fall.sum += estimate / 2 * elapsed;
  TakeChangeIfDetected(e, now);
}

void DemandMeter::TakeChangeIfDetected(Entry& e, Clock::time_point now) {
  // Evidence piles up with the arrivals: at a higher rate chance passes a
  // fixed threshold more often per second, so it grows by ln(requests per
  // second), keeping false alarms per second about level.
  const double threshold = options_.change_threshold + std::log(std::max(1.0, e.rate));
  ChangeTest* passed = e.rise.sum > threshold ? &e.rise : e.fall.sum > threshold ? &e.fall : nullptr;
  if (passed == nullptr) return;
  if (!passed->taken) ++changes_;
  const double counted_for = Seconds(now - passed->since);
  const double minimum = Seconds(options_.min_change_interval);
  e.rate = passed->arrivals / std::max(counted_for, minimum);
  if (counted_for < minimum) {
    // Provisional: the test keeps counting until the interval is complete.
    passed->taken = true;
    return;
  }
  e.rise.Restart(now);
  e.fall.Restart(now);
}

void DemandMeter::Add(const std::string& model, double requests, Clock::time_point now) {
  MutexLock lock(mu_);
  auto [it, inserted] = entries_.try_emplace(model);
  Entry& e = it->second;
  if (inserted) {
    e.at = now;
    e.rise.Restart(now);
    e.fall.Restart(now);
  }
  Advance(e, now);
  // Each request adds 1/window to the rate: a steady r requests per
  // second settles at r.
  e.rate += requests / Seconds(options_.window);
  if (options_.change_threshold <= 0) return;
  e.rise.sum += requests * kLn2;
  e.rise.arrivals += requests;
  e.fall.sum -= requests * kLn2;
  e.fall.arrivals += requests;
  if (e.fall.sum <= 0) e.fall.Restart(now);
  TakeChangeIfDetected(e, now);
}

double DemandMeter::Rate(const std::string& model, Clock::time_point now) {
  MutexLock lock(mu_);
  auto it = entries_.find(model);
  if (it == entries_.end()) return 0;
  Advance(it->second, now);
  return it->second.rate;
}

std::vector<std::pair<std::string, double>> DemandMeter::Rates(Clock::time_point now, double forget_below) {
  std::vector<std::pair<std::string, double>> out;
  MutexLock lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    Advance(it->second, now);
    const double rate = it->second.rate;
    if (rate < forget_below) {
      it = entries_.erase(it);
      continue;
    }
    out.emplace_back(it->first, rate);
    ++it;
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

uint64_t DemandMeter::changes() const {
  MutexLock lock(mu_);
  return changes_;
}

}  // namespace infergate
