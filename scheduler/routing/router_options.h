#pragma once
// The weights of `auto`'s cost model (auto_cost.h), as the core's options
// carry them: plain data, so option parsing and front ends do not see the
// cost model itself.

namespace infergate {

struct RouterOptions {
  double unmeasured_latency_us = 1000;  // assumed until measured
  double load_penalty_us = 50000;       // cost of loading a model that is not resident
  // An accelerator not measured yet for a model is taken to be this many
  // times faster than the CPU measured for it (auto and the move policy).
  double assumed_accelerator_speedup = 4;
  // No cold start (ready_path.h): a request whose model is not on its best
  // device may load it there and run (path 2) when that is expected to
  // finish first. false: the previous rule, path 1 alone (never wait for a
  // load while a copy is ready elsewhere), kept to compare the two.
  bool load_and_run = true;
  // Load on arrival (scheduler/execution/arrival_loads.h): a request that
  // `auto` sends to load and run (ready_path.h) is held while its model
  // loads, on a thread of the device's own, and queued once it is loaded,
  // so no worker waits for the transfer (the device's other requests do
  // not queue behind it) and the queue ahead at its arrival drains during
  // the load; load and run is then weighed as the longer of the load and
  // the wait for its turn, then its run. false: the request is queued at
  // once and the worker that takes it loads the model, and load and run is
  // the load, the wait and the run in turn.
  bool load_on_arrival = true;
  // With load on arrival: the held request reserves a thread of its device
  // for when its load is expected to be done (DeviceExecutor::Reserve,
  // scheduler/execution/start_reservations.h), so work that arrives during
  // the load does not take it. false: the request waits for such work.
  bool load_and_run_reserves = true;
};

}  // namespace infergate
