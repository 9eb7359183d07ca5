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
};

}  // namespace infergate
