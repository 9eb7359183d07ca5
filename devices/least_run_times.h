#pragma once
// The least host CPU time a forward pass of each model has taken on the
// host's simulated devices, by model (a key the caller names:
// scheduler/model/simulated_servable.h's
// SimulatedRunKey, the model file and its compute dtype) and rows:
// what a simulated device's compute time is charged from (simulation.h,
// SimulationRules::compute_scale), and a simulated slower CPU's.
//
// A real accelerator's time for a model and batch is the model's own, the
// same for every copy it loads. Kept per copy, each fresh copy's first run
// was charged from that one run, noisier than the least of many: on a
// shared 2-core host the first run after each load was 6% slower at the
// median and more than 20% slower one time in ten, the work a load and
// run request was charged and its estimate was not. Kept here, shared by
// its copies, a reload is charged as the model, not as a new device; and
// shared by the devices (they all compute on the host), a model's first
// run on the device it has just moved to is charged from its passes on the
// CPU and elsewhere.
//
// Thread-safe: one short lock per lookup. Shared by the SimulationRules of
// a registry's simulated devices (every copy loaded onto them) and the
// scheduler's simulated slower CPU.

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
