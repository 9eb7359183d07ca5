#include "scheduler/routing/demand_meter.h"

#include <algorithm>
#include <cmath>

namespace infergate {

double DemandMeter::Decayed(const Entry& e, Clock::time_point now) const {
  const double elapsed = std::chrono::duration<double>(now - e.at).count();
  if (elapsed <= 0) return e.rate;
  return e.rate * std::exp(-elapsed / std::chrono::duration<double>(window_).count());
}

void DemandMeter::Add(const std::string& model, double requests, Clock::time_point now) {
  MutexLock lock(mu_);
  auto [it, inserted] = entries_.try_emplace(model, Entry{0, now});
  Entry& e = it->second;
  // Each request adds 1/window to the rate: a steady r requests per
  // second settles at r.
  e.rate = Decayed(e, now) + requests / std::chrono::duration<double>(window_).count();
  e.at = std::max(e.at, now);
}

double DemandMeter::Rate(const std::string& model, Clock::time_point now) const {
  MutexLock lock(mu_);
  auto it = entries_.find(model);
  return it == entries_.end() ? 0 : Decayed(it->second, now);
}

std::vector<std::pair<std::string, double>> DemandMeter::Rates(Clock::time_point now, double forget_below) {
  std::vector<std::pair<std::string, double>> out;
  MutexLock lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    const double rate = Decayed(it->second, now);
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

}  // namespace infergate
