#include "scheduler/routing/auto_cost.h"

#include <algorithm>

namespace infergate {

void LatencyStats::Observe(const std::string& model, const DeviceId& device, double micros) {
  MutexLock lock(mu_);
  auto [it, inserted] = ewma_.try_emplace({model, device}, micros);
  if (!inserted) it->second += alpha_ * (micros - it->second);
}

std::optional<double> LatencyStats::Mean(const std::string& model, const DeviceId& device) const {
  MutexLock lock(mu_);
  auto it = ewma_.find({model, device});
  if (it == ewma_.end()) return std::nullopt;
  return it->second;
}

int ChooseDevice(const std::vector<RouteCandidate>& candidates, const RouterOptions& options) {
  int best = -1;
  double best_cost = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const RouteCandidate& c = candidates[i];
    double latency = c.latency_us.value_or(options.unmeasured_latency_us);
    double ahead = static_cast<double>(c.queued + c.running) / std::max(1, c.workers) + 1.0;
    double cost = ahead * latency + (c.resident ? 0.0 : options.load_penalty_us);
    if (best < 0 || cost < best_cost) {
      best = static_cast<int>(i);
      best_cost = cost;
    }
  }
  return best;
}

}  // namespace infergate
