#pragma once
// Which models an accelerator should hold when more are wanted than fit: a
// pure function from what was measured (each model's demand, its compute
// time on the accelerator and off it, what moving it costs) to the moves,
// so the policy reads (and is tested) as one table.
//
// A model's gain from being on the accelerator over the next window is the
// time its requests would save; under the tail objective (the default),
// each request's saving weighed by how long it takes:
//   demand x window x (elsewhere - accelerator) x weight,
//   weight = ((elsewhere + accelerator) / 2) / reference,
// where `reference` is the same mean over the models that have demand,
// weighed by it (ReferenceLatency). That is the drop in the requests'
// summed squared latency, in units of time: a millisecond saved on a
// request that takes 60 counts more than one saved on a request that takes
// 6, so the slow requests that make the tail are the ones kept on the
// accelerator first. (Unweighed, a model's gain per byte is only its
// demand: a model's times grow with its bytes, and the largest models,
// 4x slower on the CPU, were the ones left there.) The mean objective
// leaves the savings unweighed: the mean latency is lowest, the tail not.
// A model not on it is promoted when its gain exceeds, by the hysteresis
// factor, its transfer time plus the gain of the models it would displace
// (the smallest gains first, until it fits); models that moved on less than
// `min_residence` ago, and pinned ones, are not displaced. So a model is not
// moved for a gain that its own transfer eats, and two models of like
// demand do not swap back and forth. At most one promotion per decision: the next decision
// sees its effect.
//
// Under the tail-set objective the models of the tail set (tail_set.h: those
// that must be on the accelerator for the fewest requests to pass the
// lowest threshold the budget allows) gain more than every other model's
// gain and cost together: they are promoted first, displace the others
// first, and are displaced by none (nor by one another: each is worth more
// than the promotion that would displace it).
//
// The staging share: `budget_bytes` is the policy's, less than the device's
// (`device_budget_bytes`) when requests may load and run into the rest
// (scheduler_options.h staging_share). Copies they load are `staged`: they
// hold none of the policy's budget and stay in the rest until a load needs
// their room (core_parts.h MakeStagingRoom); a promotion displaces placed
// copies for the policy's budget and staged ones only for the device's.
// (They were trimmed back on every decision once: the rows that loaded and
// ran reloaded half their copies within a second of the trim.) Over either
// budget (the policy's shrunk, a race) the decision is a trim: copies
// demoted, the smallest gains first, until both fit (a staged copy whatever
// its residence, a placed one once past the minimum residence; never a
// pinned one). Without a staging share every copy counts in the one budget.

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/model/load_source.h"

namespace infergate {

struct MoveCandidate {
  std::string model;
  double demand_per_second = 0;  // requests, over the last window
  double accelerator_us = 0;     // compute per request there (learned)
  double elsewhere_us = 0;       // compute per request where it runs otherwise
  double transfer_us = 0;        // moving its weights onto the accelerator (learned)
  uint64_t bytes = 0;            // what it takes on the accelerator
  bool resident = false;         // on the accelerator now
  double resident_for_s = 0;     // since it moved there (resident only)
  bool pinned = false;           // its config keeps it there: never displaced
  // Resident because a request loaded it (load and run into the staging
  // share), not by the policy's decision: displaced however recently it
  // came, so the staging share is the policy's to keep or give back.
  bool staged = false;
  // Where its next load there starts (which of the learned load times
  // transfer_us is).
  LoadSource next_load = LoadSource::kFile;
  // A request's time when it loads the model there and runs (load and run,
  // ready_path.h), when the rule allows it; 0: it does not. Only the
  // tail-set objective reads it (tail_set.h); tail and mean weigh the copy
  // elsewhere.
  double load_and_run_us = 0;
};

enum class MoveObjective {
  kTail,  // savings weighed by the requests' latency (the summed squared latency)
  kMean,  // savings unweighed (the summed latency)
  // The fewest requests past the lowest threshold the budget allows
  // (tail_set.h): the models that keep their requests under it are kept
  // first, whatever the others gain; then as kTail.
  kTailSet,
};

struct MoveInputs {
  MoveObjective objective = MoveObjective::kTail;
  double window_s = 10;
  uint64_t budget_bytes = 0;         // the policy's: what the copies it placed may hold
  uint64_t device_budget_bytes = 0;  // every copy's there (0: budget_bytes)
  double hysteresis = 1.5;           // a promotion must gain this many times its cost
  double min_residence_s = 5;
  double tail_share = 0.01;  // kTailSet: the share of the demand that may be slow (the p99's)
  std::vector<MoveCandidate> models;
};

struct MoveDecision {
  std::string promote;              // empty: none (a trim when `demote` is not)
  std::vector<std::string> demote;  // to make room for it (or the trim), smallest gain first
  double gain_us = 0;               // the promoted model's over the window
  double cost_us = 0;               // its transfer plus the displaced models' gains
  friend bool operator==(const MoveDecision&, const MoveDecision&) = default;
};

// The demand-weighed mean of (elsewhere + accelerator) / 2 over `models`
// (0 when none has demand): the latency a weight of 1 stands for.
double ReferenceLatency(const std::vector<MoveCandidate>& models);

// The model's gain from the accelerator over `window_s`, in microseconds
// (zero when it is not faster there), its saving weighed by its latency
// against `reference_us`; unweighed when `reference_us` is 0 (the mean
// objective, or no model has demand).
double AcceleratorGain(const MoveCandidate& model, double window_s, double reference_us);

MoveDecision DecideMoves(const MoveInputs& inputs);

}  // namespace infergate
