#pragma once
// The rule `auto` follows when background moves are on ("no cold start"):
// no request is slower than the fastest path that was ready when it
// arrived. A pure function from the candidates' estimates to the path, so
// the rule reads (and is tested) as one table (tests/scheduler/routing/
// ready_path_test.cc).
//
// When the model is resident on its best device (where it would run were
// it resident everywhere, `ideal`), it runs there. Otherwise the paths are:
//  1. run now where the model is resident: the best of those copies by
//     expected completion (ExpectedCompletionUs: the work ahead there, then
//     this request);
//  2. load it onto the best device and run there ("load and run"): the
//     load's estimate (RouteCandidate::load_us: the load time learned
//     there, which a request would wait for, plus the moves queued on the
//     device's link and, with load on arrival, the loads before it on the
//     device's lane) and then its expected completion there. With load on
//     arrival (RouterOptions::load_on_arrival; scheduler/execution/
//     arrival_loads.h) the request is held while its model loads and then
//     queued, no worker waiting for the load, while the work queued ahead
//     of it at its arrival runs: the longer of the load and that wait,
//     then its run. Work that arrives during the load does not take the
//     thread it will need (RouterOptions::load_and_run_reserves;
//     scheduler/execution/start_reservations.h). A move the placement
//     controller has under way is this path too: the cache loads a copy
//     once, and a request sent there waits for that load.
// The faster wins; a tie, or a load never measured there (its file
// reading, deserialisation and warm-up are not guessed), keeps the
// resident copy. With no copy resident anywhere the request is a cold
// start and loads where `auto` would send it anyway. The previous rule
// ("never wait for a load while a copy is ready") is path 1 alone: it sent
// a request to a CPU copy 4x slower although loading onto the accelerator
// and running there would have answered sooner. It stays, to compare the
// two (RouterOptions::load_and_run false, --load-and-run=false).

#include <vector>

#include "scheduler/routing/auto_cost.h"
#include "scheduler/routing/router_options.h"

namespace infergate {

enum class ReadyPath {
  kIdeal,       // resident on its best device: runs there
  kResident,    // runs now on another device's resident copy
  kLoadAndRun,  // loads onto its best device (or waits for the move there) and runs there
  kColdStart,   // resident nowhere: loads where auto sends it
};

struct PathChoice {
  ReadyPath path = ReadyPath::kColdStart;
  int index = -1;             // the candidate it runs on
  double expected_us = 0;     // when it is expected to finish (from now)
  double alternative_us = 0;  // kResident / kLoadAndRun: the path not taken's estimate (0: none)
  double load_us = 0;         // kLoadAndRun / kColdStart: the load's estimate within expected_us (0: none)
};

// `ideal`: the index of the best device were the model resident everywhere
// (ChooseDevice over the candidates, all marked resident). -1 (no
// candidates) gives a cold start with index -1.
PathChoice ChooseReadyPath(const std::vector<RouteCandidate>& candidates, int ideal, const RouterOptions& options);

// "ideal", "resident", "load_and_run", "cold_start": the path's label in
// metrics and logs.
const char* ReadyPathName(ReadyPath path);

// Regret: a request that finished more than kRegretMargin (20%) after the
// estimate of the path it took, the fastest ready when it arrived (the
// estimate was wrong, or the path was slower than the estimates said).
// False without an estimate (expected_us <= 0: a load never measured).
inline constexpr double kRegretMargin = 0.2;
bool IsRegret(double expected_us, double took_us);

}  // namespace infergate
