#pragma once
// The least host CPU time a forward pass of each model has taken on one
// simulated device, by model (a key the caller names; SimulatedServable's
// is the model file and its compute dtype) and rows: what that device's
// compute time is charged from (simulation.h, SimulationRules::compute_scale).
//
// A real accelerator's time for a model and batch is the model's own, the
// same for every copy it loads. Kept per copy, each fresh copy's first run
// was charged from that one run, noisier than the least of many: on a
// shared 2-core host the first run after each load was 6% slower at the
// median and more than 20% slower one time in ten, the work a load and
// run request was charged and its estimate was not. Kept here, per device
// and shared by its copies, a reload is charged as the model, not as a
// new device.
//
// Thread-safe: one short lock per lookup. Owned by the device's
// SimulationRules, shared by every copy loaded onto it.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "common/mutex.h"

namespace infergate {

class LeastRunTimes {
 public:
  // Lowers the least time for `model`'s runs of `rows` rows to `work_us`
  // if that is less, and returns the least (`work_us` on its first run).
  uint64_t Lower(const std::string& model, int64_t rows, uint64_t work_us);

 private:
  static constexpr size_t kMaxEntries = 65536;
  Mutex mu_;
  std::map<std::pair<std::string, int64_t>, uint64_t> least_us_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infergate
