#pragma once
// The cost model `auto` routes by: picks the device expected to finish a
// request soonest, from per-device load and a moving average of the
// model's measured latency there. The route planner (route_planner.h)
// decides everything else about where a request runs.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "devices/device_id.h"
#include "scheduler/routing/router_options.h"

namespace infergate {

// Exponentially weighted moving averages of the compute time of the run
// that carries a request (a batch's whole run: each of its requests waits
// for all of it), by (model, device). A copy's first run pays for lazy
// initialisation (the TorchScript executor profiles and optimises it), so
// the first sample is not an average's seed: Mean answers nothing until a
// second sample, which replaces the first. Thread-safe; updates are one short lock.
class LatencyStats {
 public:
  explicit LatencyStats(double alpha = 0.2) : alpha_(alpha) {}
  void Observe(const std::string& model, const DeviceId& device, double micros);
  // The requests' average; unset before a second sample.
  std::optional<double> Mean(const std::string& model, const DeviceId& device) const;
  // A run measured outside a request (a warm-up's timed run, after the
  // runs that paid for lazy initialisation), kept apart from the requests'
  // samples.
  void Seed(const std::string& model, const DeviceId& device, double micros);
  // What a request there is expected to take: the requests' average, else
  // the seed; unset when neither was measured. Routing goes by this; the
  // move policy by Mean, the requests' own (what a warm-up on an idle
  // device measured is no demand's evidence).
  std::optional<double> Expected(const std::string& model, const DeviceId& device) const;

 private:
  double alpha_;
  mutable Mutex mu_;
  struct Entry {
    double ewma = 0;
    uint64_t samples = 0;
    std::optional<double> seed;
  };
  std::map<std::pair<std::string, DeviceId>, Entry> ewma_ ABSL_GUARDED_BY(mu_);
};

struct RouteCandidate {
  DeviceId device;
  size_t queued = 0;   // jobs waiting
  size_t running = 0;  // jobs executing
  int workers = 1;
  bool resident = false;             // the model is loaded there
  bool demoted = false;              // not resident: demoted from there to make room
  std::optional<double> latency_us;  // the model's average there, if measured
  // How long until a thread there would start this request, in
  // microseconds (ExpectedStartUs over DeviceExecutor::LoadFor: the
  // running batches' remaining time, the queued jobs' own expected compute,
  // the threads); unset: the work ahead is counted as `queued + running`
  // of this model over the workers.
  std::optional<double> starts_in_us;
  // Not resident: how long until a copy could be ready there if a request
  // loaded it now (its load time learned there, plus the moves queued on
  // the device's link); unset while no load there was measured.
  std::optional<double> load_us;
};

// When a request sent to `candidate` now would finish, its model resident:
// when it would start (starts_in_us; else as many of this request's runs
// as are queued and running, over the workers), then its latency there.
double ExpectedCompletionUs(const RouteCandidate& candidate, const RouterOptions& options);

// Fills in the latencies not measured yet from the one measured: each
// accelerator candidate's as the CPU candidate's over
// `options.assumed_accelerator_speedup` (an accelerator is assumed faster
// until it is measured), or, with the CPU's not measured, the CPU's as the
// fastest measured accelerator's times that speedup (a model demoted to
// the CPU is not taken for a 1 ms one there). Nothing measured: unset.
void EstimateUnmeasuredLatencies(std::vector<RouteCandidate>& candidates, const RouterOptions& options);

// Index of the candidate with the smallest expected completion time:
// (work ahead / workers + this request) x latency, plus the load penalty
// when not resident. Ties keep the earlier candidate, so candidates listed
// in cold-start order (CUDA, MPS, CPU) decide a cold start. -1 if empty.
int ChooseDevice(const std::vector<RouteCandidate>& candidates, const RouterOptions& options = {});

}  // namespace infergate
