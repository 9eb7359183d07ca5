#include "scheduler/routing/move_policy.h"

#include <algorithm>

namespace infergate {

double ReferenceLatency(const std::vector<MoveCandidate>& models) {
  double weighed = 0, demand = 0;
  for (const MoveCandidate& m : models) {
    if (m.demand_per_second <= 0) continue;
    weighed += m.demand_per_second * (m.elsewhere_us + m.accelerator_us) / 2;
    demand += m.demand_per_second;
  }
  return demand > 0 ? weighed / demand : 0;
}

double AcceleratorGain(const MoveCandidate& model, double window_s, double reference_us) {
  const double per_request = model.elsewhere_us - model.accelerator_us;
  if (per_request <= 0 || model.demand_per_second <= 0) return 0;
  const double weight = reference_us > 0 ? (model.elsewhere_us + model.accelerator_us) / 2 / reference_us : 1;
  return model.demand_per_second * window_s * per_request * weight;
}

MoveDecision DecideMoves(const MoveInputs& inputs) {
  const double reference = inputs.objective == MoveObjective::kTail ? ReferenceLatency(inputs.models) : 0;
  auto gain_of = [&](const MoveCandidate& m) { return AcceleratorGain(m, inputs.window_s, reference); };
  uint64_t used = 0;
  std::vector<const MoveCandidate*> residents;
  for (const MoveCandidate& m : inputs.models) {
    if (!m.resident) continue;
    used += m.bytes;
    residents.push_back(&m);
  }
  // Those that may be displaced, the smallest gain first (name breaks ties,
  // so the decision does not depend on the order it was given).
  std::vector<const MoveCandidate*> displaceable;
  for (const MoveCandidate* m : residents) {
    if (!m->pinned && (m->staged || m->resident_for_s >= inputs.min_residence_s)) displaceable.push_back(m);
  }
  std::sort(displaceable.begin(), displaceable.end(), [&](const MoveCandidate* a, const MoveCandidate* b) {
    const double ga = gain_of(*a), gb = gain_of(*b);
    return ga != gb ? ga < gb : a->model < b->model;
  });
  if (used > inputs.budget_bytes) {  // over the policy's budget: trim first
    MoveDecision trim;
    for (size_t i = 0; used > inputs.budget_bytes && i < displaceable.size(); ++i) {
      trim.demote.push_back(displaceable[i]->model);
      trim.cost_us += gain_of(*displaceable[i]);
      used -= displaceable[i]->bytes;
    }
    if (!trim.demote.empty()) return trim;
  }

  MoveDecision best;
  double best_margin = 0;
  for (const MoveCandidate& m : inputs.models) {
    if (m.resident || m.bytes > inputs.budget_bytes) continue;
    const double gain = gain_of(m);
    if (gain <= 0) continue;
    MoveDecision d;
    d.promote = m.model;
    d.gain_us = gain;
    d.cost_us = m.transfer_us;
    uint64_t free = inputs.budget_bytes > used ? inputs.budget_bytes - used : 0;
    for (size_t i = 0; free < m.bytes && i < displaceable.size(); ++i) {
      d.demote.push_back(displaceable[i]->model);
      d.cost_us += gain_of(*displaceable[i]);
      free += displaceable[i]->bytes;
    }
    if (free < m.bytes) continue;  // room only by displacing models that just moved
    if (gain <= inputs.hysteresis * d.cost_us) continue;
    const double margin = gain - inputs.hysteresis * d.cost_us;
    if (best.promote.empty() || margin > best_margin || (margin == best_margin && m.model < best.promote)) {
      best = d;
      best_margin = margin;
    }
  }
  return best;
}

}  // namespace infergate
