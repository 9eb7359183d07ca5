#include "scheduler/execution/start_reservations.h"

#include <algorithm>
#include <cstddef>

namespace infergate {

bool MayStartBeforeReservations(double job_us, int threads, const std::vector<double>& busy_us,
                                const std::vector<StartReservation>& reservations) {
  if (job_us <= 0) return true;  // rule 3
  for (size_t r = 0; r < reservations.size(); ++r) {
    const double due = std::max(0.0, reservations[r].due_in_us);
    if (due >= job_us) continue;  // the job is expected to be done by then
    int busy = 1;                 // the job
    for (double left : busy_us) busy += left > due ? 1 : 0;
    for (size_t q = 0; q < reservations.size(); ++q) {
      if (q == r) continue;
      const double q_due = std::max(0.0, reservations[q].due_in_us);
      const bool before = q_due < due || (q_due == due && q < r);
      if (before && q_due + reservations[q].run_us > due) ++busy;
    }
    if (busy >= std::max(1, threads)) return false;  // rule 2
  }
  return true;
}

}  // namespace infergate
