#include "devices/least_run_times.h"

#include <algorithm>

namespace infergate {

uint64_t LeastRunTimes::Lower(const std::string& model, int64_t rows, uint64_t work_us) {
  MutexLock lock(mu_);
  // Bounded: a repository whose models keep changing names starts over.
  if (least_us_.size() >= kMaxEntries) least_us_.clear();
  auto [it, added] = least_us_.emplace(std::make_pair(model, rows), work_us);
  if (!added) it->second = std::min(it->second, work_us);
  return it->second;
}

}  // namespace infergate
