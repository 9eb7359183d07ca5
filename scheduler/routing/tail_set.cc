#include "scheduler/routing/tail_set.h"

#include <algorithm>

namespace infergate {

double OffAcceleratorUs(const MoveCandidate& model) {
  return model.load_and_run_us > 0 ? std::min(model.elsewhere_us, model.load_and_run_us) : model.elsewhere_us;
}

TailSet ChooseTailSet(const std::vector<MoveCandidate>& models, uint64_t budget_bytes, double tail_share) {
  double demand = 0;
  uint64_t pinned_bytes = 0;
  std::vector<double> thresholds = {0};
  for (const MoveCandidate& m : models) {
    if (m.pinned && m.resident) pinned_bytes += m.bytes;
    if (m.demand_per_second <= 0) continue;
    demand += m.demand_per_second;
    thresholds.push_back(OffAcceleratorUs(m));
    thresholds.push_back(m.accelerator_us);
  }
  std::sort(thresholds.begin(), thresholds.end());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());  // each T weighed once
  const double slack = std::clamp(tail_share, 0.0, 1.0) * demand;
  const uint64_t room = budget_bytes > pinned_bytes ? budget_bytes - pinned_bytes : 0;
  for (const double t : thresholds) {
    // (1) who wants the accelerator at T, and the demand slow anywhere.
    double slow_anywhere = 0;
    std::vector<const MoveCandidate*> wanting;
    for (const MoveCandidate& m : models) {
      if (m.demand_per_second <= 0) continue;
      if (m.accelerator_us > t) {
        slow_anywhere += m.demand_per_second;
      } else if (OffAcceleratorUs(m) > t && !(m.pinned && m.resident)) {
        wanting.push_back(&m);
      }
    }
    if (slow_anywhere > slack) continue;
    // (2) leave off the most bytes per request first, within the slack.
    std::sort(wanting.begin(), wanting.end(), [](const MoveCandidate* a, const MoveCandidate* b) {
      const double ba = static_cast<double>(a->bytes) / a->demand_per_second;
      const double bb = static_cast<double>(b->bytes) / b->demand_per_second;
      return ba != bb ? ba > bb : a->model < b->model;
    });
    double left_off = slow_anywhere;
    uint64_t bytes = 0;
    TailSet set{t, {}};
    for (const MoveCandidate* m : wanting) {
      if (left_off + m->demand_per_second <= slack) {
        left_off += m->demand_per_second;
        continue;
      }
      bytes += m->bytes;
      set.models.insert(m->model);
    }
    // (3) feasible when the rest fit.
    if (bytes <= room) return set;
  }
  return {};
}

}  // namespace infergate
