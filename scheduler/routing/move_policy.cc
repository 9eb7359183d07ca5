#include "scheduler/routing/move_policy.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "scheduler/routing/tail_set.h"

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
  const double reference = inputs.objective != MoveObjective::kMean ? ReferenceLatency(inputs.models) : 0;
  // Each model's gain, computed once (models.size() is small, but the
  // sort below asks for it in every comparison).
  std::vector<double> gains(inputs.models.size());
  for (size_t i = 0; i < inputs.models.size(); ++i) {
    gains[i] = AcceleratorGain(inputs.models[i], inputs.window_s, reference);
  }
  // The tail set's members gain more than any promotion could cost
  // without one of them: every other model's gain and the largest
  // transfer, times the hysteresis.
  if (inputs.objective == MoveObjective::kTailSet) {
    const std::set<std::string> tail_set = ChooseTailSet(inputs.models, inputs.budget_bytes, inputs.tail_share).models;
    double all_gains = 0, transfer = 0;
    for (size_t i = 0; i < inputs.models.size(); ++i) {
      all_gains += gains[i];
      transfer = std::max(transfer, inputs.models[i].transfer_us);
    }
    const double set_bonus = std::max(1.0, inputs.hysteresis) * (all_gains + transfer) + 1;
    for (size_t i = 0; i < inputs.models.size(); ++i) {
      if (tail_set.count(inputs.models[i].model)) gains[i] += set_bonus;
    }
  }
  auto gain_of = [&](const MoveCandidate& m) { return gains[&m - inputs.models.data()]; };
  // Two limits: the copies the policy placed hold at most its budget, and
  // every copy there at most the device's. With a staging share (the
  // policy's budget below the device's) the copies requests staged hold
  // none of the policy's budget: they stay in the rest until a load needs
  // their room. Without one, every copy counts against the one budget.
  const uint64_t device_budget = std::max(inputs.budget_bytes, inputs.device_budget_bytes);
  const bool staging_room = device_budget > inputs.budget_bytes;
  auto holds_policy_budget = [&](const MoveCandidate& m) { return !m.staged || !staging_room; };
  uint64_t placed_used = 0, used = 0;
  std::vector<const MoveCandidate*> residents;
  for (const MoveCandidate& m : inputs.models) {
    if (!m.resident) continue;
    used += m.bytes;
    if (holds_policy_budget(m)) placed_used += m.bytes;
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
  // Displaces into `d`, the smallest gains first, until the placed copies
  // with `adding` more fit the policy's budget (by copies that hold it) and
  // every copy with `adding` more fits the device's; whether they fit.
  auto displace = [&](uint64_t adding, MoveDecision& d) {
    uint64_t placed_after = placed_used + adding, after = used + adding;
    std::vector<bool> taken(displaceable.size(), false);
    auto take = [&](size_t i) {
      const MoveCandidate& out = *displaceable[i];
      taken[i] = true;
      d.demote.push_back(out.model);
      d.cost_us += gain_of(out);
      after -= out.bytes;
      if (holds_policy_budget(out)) placed_after -= out.bytes;
    };
    for (size_t i = 0; placed_after > inputs.budget_bytes && i < displaceable.size(); ++i) {
      if (holds_policy_budget(*displaceable[i])) take(i);
    }
    for (size_t i = 0; after > device_budget && i < displaceable.size(); ++i) {
      if (!taken[i]) take(i);
    }
    return placed_after <= inputs.budget_bytes && after <= device_budget;
  };
  if (placed_used > inputs.budget_bytes || used > device_budget) {  // over a budget: trim first
    MoveDecision trim;
    displace(0, trim);
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
    if (!displace(m.bytes, d)) continue;  // room only by displacing models that just moved
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
