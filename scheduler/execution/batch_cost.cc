#include "scheduler/execution/batch_cost.h"

#include <algorithm>

namespace infergate {

namespace {
constexpr double kAlpha = 0.2;  // weight of a new sample in the moving average
int64_t Tracked(int64_t rows) { return std::clamp<int64_t>(rows, 1, BatchCostModel::kMaxTrackedRows); }
}  // namespace

void BatchCostModel::Record(const std::string& key, int64_t rows, uint64_t us) {
  if (key.empty()) return;
  int64_t r = Tracked(rows);
  MutexLock lock(mu_);
  Curve& curve = curves_[key];
  if (static_cast<int64_t>(curve.sizes.size()) <= r) curve.sizes.resize(r + 1);
  Size& s = curve.sizes[r];
  // The first run of a size may include one-time work (TorchScript's
  // profiling runs for a new shape), so the second sample replaces it.
  if (s.samples <= 1) {
    s.us = static_cast<double>(us);
  } else {
    s.us += kAlpha * (static_cast<double>(us) - s.us);
  }
  s.samples++;
}

size_t BatchCostModel::Choose(const std::string& key, const std::vector<int64_t>& job_rows,
                              const std::vector<int64_t>& preferred) {
  if (job_rows.size() <= 1 || key.empty()) return job_rows.size();
  std::vector<int64_t> prefix;
  prefix.reserve(job_rows.size());
  int64_t total = 0;
  for (int64_t r : job_rows) prefix.push_back(total += r);
  for (size_t i = prefix.size(); i-- > 0 && !preferred.empty();) {
    if (std::find(preferred.begin(), preferred.end(), prefix[i]) != preferred.end()) return i + 1;
  }

  MutexLock lock(mu_);
  Curve& curve = curves_[key];
  uint64_t decision = curve.decisions++;
  auto size_of = [&](size_t i) -> const Size* {
    int64_t r = Tracked(prefix[i]);
    return r < static_cast<int64_t>(curve.sizes.size()) ? &curve.sizes[r] : nullptr;
  };
  // Unmeasured sizes first, the largest of them.
  for (size_t i = prefix.size(); i-- > 0;) {
    const Size* s = size_of(i);
    if (!s || s->samples < 2) return i + 1;
  }
  // Now and then, another size than the best, taken in turn.
  if (decision % kExploreEvery == kExploreEvery - 1) {
    return (decision / kExploreEvery) % prefix.size() + 1;
  }
  size_t best = prefix.size() - 1;
  double best_rate = -1;
  for (size_t i = 0; i < prefix.size(); ++i) {
    double rate = static_cast<double>(prefix[i]) / std::max(size_of(i)->us, 1.0);
    if (rate >= best_rate) {
      best_rate = rate;
      best = i;
    }
  }
  return best + 1;
}

bool BatchCostModel::WorthWaiting(const std::string& key, int64_t rows, int64_t max_rows) const {
  if (rows >= max_rows) return false;
  MutexLock lock(mu_);
  auto it = curves_.find(key);
  if (it == curves_.end()) return true;
  const std::vector<Size>& sizes = it->second.sizes;
  const int64_t now = Tracked(rows);
  const int64_t top = std::min<int64_t>(Tracked(max_rows), static_cast<int64_t>(sizes.size()) - 1);
  if (now >= static_cast<int64_t>(sizes.size()) || sizes[now].samples < 2) return true;
  const double rate_now = static_cast<double>(now) / std::max(sizes[now].us, 1.0);
  bool larger_measured = false;
  for (int64_t r = now + 1; r <= top; ++r) {
    if (sizes[r].samples < 2) continue;
    larger_measured = true;
    if (static_cast<double>(r) / std::max(sizes[r].us, 1.0) > rate_now * kWorthWaitingGain) return true;
  }
  return !larger_measured;
}

bool BatchCostModel::SplitFinishesSooner(const std::string& key, int64_t rows, int64_t share) const {
  if (share >= rows || share < 1) return false;
  MutexLock lock(mu_);
  auto it = curves_.find(key);
  if (it == curves_.end()) return false;
  const std::vector<Size>& sizes = it->second.sizes;
  const int64_t whole = Tracked(rows);
  if (whole >= static_cast<int64_t>(sizes.size()) || sizes[whole].samples < 2) return false;
  double share_us = -1;
  for (int64_t s = 1; s <= std::min<int64_t>(Tracked(share), static_cast<int64_t>(sizes.size()) - 1); ++s) {
    if (sizes[s].samples < 2) continue;
    const double us = static_cast<double>((share + s - 1) / s) * sizes[s].us;
    if (share_us < 0 || us < share_us) share_us = us;
  }
  return share_us >= 0 && share_us * kSplitGain < sizes[whole].us;
}

double BatchCostModel::CostUs(const std::string& key, int64_t rows) const {
  MutexLock lock(mu_);
  auto it = curves_.find(key);
  int64_t r = Tracked(rows);
  if (it == curves_.end() || r >= static_cast<int64_t>(it->second.sizes.size())) return -1;
  const Size& s = it->second.sizes[r];
  return s.samples == 0 ? -1 : s.us;
}

}  // namespace infergate
