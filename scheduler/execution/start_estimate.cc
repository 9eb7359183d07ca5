#include "scheduler/execution/start_estimate.h"

#include <algorithm>

namespace infergate {

double ExpectedStartUs(const DeviceLoad& load) {
  std::vector<double> free_in = load.busy_us;  // when each thread is free, earliest first
  for (double& us : free_in) us = std::max(0.0, us);
  if (static_cast<int>(free_in.size()) < load.threads) free_in.resize(static_cast<size_t>(load.threads), 0.0);
  if (free_in.empty()) free_in.push_back(0.0);
  std::sort(free_in.begin(), free_in.end());
  std::vector<StartReservation> reserved = load.reserved;
  std::stable_sort(reserved.begin(), reserved.end(),
                   [](const StartReservation& a, const StartReservation& b) { return a.due_in_us < b.due_in_us; });
  for (const StartReservation& r : reserved) {  // rule 4; free_in[0] is the thread free earliest
    const double due = std::max(0.0, r.due_in_us);
    if (load.job_us > 0 && free_in[0] + load.job_us <= due) continue;  // the job goes first there
    free_in[0] = std::max(free_in[0], due) + std::max(0.0, r.run_us);
    std::sort(free_in.begin(), free_in.end());
  }
  const double queued = std::max(0.0, load.queued_us);
  // The queued work fills the k earliest-free threads up to a level t:
  // queued = sum over those threads of (t - free_in[i]), with t no later
  // than the next thread's free time (else that one takes some too).
  double start = free_in.back();
  double filled = 0;  // sum of free_in[0..k)
  for (size_t k = 1; k <= free_in.size(); ++k) {
    filled += free_in[k - 1];
    const double level = (queued + filled) / static_cast<double>(k);
    if (k == free_in.size() || level <= free_in[k]) {
      start = level;
      break;
    }
  }
  if (load.flow_free_us) start = std::max(start, *load.flow_free_us);
  return start;
}

}  // namespace infergate
