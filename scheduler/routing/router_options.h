#pragma once
// The weights of `auto`'s cost model (auto_cost.h), as the core's options
// carry them: plain data, so option parsing and front ends do not see the
// cost model itself.

namespace infergate {

struct RouterOptions {
  double unmeasured_latency_us = 1000;  // assumed until measured
  double load_penalty_us = 50000;       // cost of loading a model that is not resident
};

}  // namespace infergate
