#include "scheduler/routing/staging_eviction.h"

#include <algorithm>
#include <numeric>

namespace infergate {

std::vector<size_t> StagedEvictionOrder(const std::vector<StagedCopy>& copies) {
  std::vector<size_t> order(copies.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) {
    const StagedCopy& a = copies[i];
    const StagedCopy& b = copies[j];
    if (a.recent_demand_per_second != b.recent_demand_per_second) {
      return a.recent_demand_per_second < b.recent_demand_per_second;
    }
    return a.last_used < b.last_used;
  });
  return order;
}

}  // namespace infergate
