#include "scheduler/routing/auto_cost.h"

#include <algorithm>

namespace infergate {

void LatencyStats::Observe(const std::string& model, const DeviceId& device, double micros) {
  MutexLock lock(mu_);
  Entry& e = ewma_[{model, device}];
  ++e.samples;
  if (e.samples <= 2) {
    e.ewma = micros;  // the second replaces the first (lazy initialisation)
  } else {
    e.ewma += alpha_ * (micros - e.ewma);
  }
}

void LatencyStats::Seed(const std::string& model, const DeviceId& device, double micros) {
  MutexLock lock(mu_);
  ewma_[{model, device}].seed = micros;
}

std::optional<double> LatencyStats::Expected(const std::string& model, const DeviceId& device) const {
  MutexLock lock(mu_);
  auto it = ewma_.find({model, device});
  if (it == ewma_.end()) return std::nullopt;
  if (it->second.samples >= 2) return it->second.ewma;
  return it->second.seed;
}

std::optional<double> LatencyStats::Mean(const std::string& model, const DeviceId& device) const {
  MutexLock lock(mu_);
  auto it = ewma_.find({model, device});
  if (it == ewma_.end() || it->second.samples < 2) return std::nullopt;
  return it->second.ewma;
}

void EstimateUnmeasuredLatencies(std::vector<RouteCandidate>& candidates, const RouterOptions& options) {
  const double speedup = std::max(1.0, options.assumed_accelerator_speedup);
  RouteCandidate* cpu = nullptr;
  std::optional<double> fastest_accelerator;
  for (RouteCandidate& c : candidates) {
    if (c.device.kind == DeviceKind::kCpu) {
      cpu = &c;
    } else if (c.latency_us && (!fastest_accelerator || *c.latency_us < *fastest_accelerator)) {
      fastest_accelerator = c.latency_us;
    }
  }
  if (cpu == nullptr) return;
  if (cpu->latency_us) {
    for (RouteCandidate& c : candidates) {
      if (c.device.kind != DeviceKind::kCpu && !c.latency_us) c.latency_us = *cpu->latency_us / speedup;
    }
  } else if (fastest_accelerator) {
    cpu->latency_us = *fastest_accelerator * speedup;
  }
}

double ExpectedCompletionUs(const RouteCandidate& c, const RouterOptions& options) {
  const double latency = c.latency_us.value_or(options.unmeasured_latency_us);
  const double workers = std::max(1, c.workers);
  if (c.starts_in_us) return *c.starts_in_us + latency;
  return (static_cast<double>(c.queued + c.running) / workers + 1.0) * latency;
}

int ChooseDevice(const std::vector<RouteCandidate>& candidates, const RouterOptions& options) {
  int best = -1;
  double best_cost = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const RouteCandidate& c = candidates[i];
    const double cost = ExpectedCompletionUs(c, options) + (c.resident ? 0.0 : options.load_penalty_us);
    if (best < 0 || cost < best_cost) {
      best = static_cast<int>(i);
      best_cost = cost;
    }
  }
  return best;
}

}  // namespace infergate
