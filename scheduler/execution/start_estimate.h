#pragma once
// When a job submitted to a device now would start running, from what the
// device's threads are doing: a pure function, so the estimate reads (and
// is tested) as one table (tests/scheduler/execution/start_estimate_test.cc).
//
// `auto` adds the job's own expected compute to it (ExpectedCompletionUs).
// The rule:
//  1. A running batch holds its thread until it is expected to end (its
//     start plus its expected compute); one that ran past that, or whose
//     answers already went out, holds it no longer.
//  2. The queued work is taken by the threads as they free up, the
//     earliest free first, and the job starts once it is taken: the level
//     at which the threads' remaining time plus the queued work is spread
//     evenly over them ("water-filling", the queued work taken as
//     divisible). One thread: the sum of what is ahead; two threads, one
//     free now and one in 30 ms, and 10 ms queued: 10 ms.
//  3. A job whose flow already runs as many batches as it may (FairQueue's
//     running limit) starts no sooner than the first of them ends.
//  4. Before the queued work, each request held for its load with a
//     reservation on the device (start_reservations.h) takes the thread
//     free earliest, in the order they fall due: from when it falls due
//     (or the thread frees, if later) to the end of its run. A thread
//     free until a reservation falls due is not taken, though: it gets the
//     job where the job, started there, would be done by then (rule 2
//     there). A reservation is thus not work queued now: one due in 8 ms
//     that runs 9 ms holds a free thread until 17 ms, not 9 ms.
// The queued work counts whole, as if it all ran before the job. Fair
// sharing may run the job sooner (a flow with nothing waiting goes ahead
// of a busy one) or later (a lighter flow's requests that arrive after it
// go first); neither is estimated. The second was most of what the churn
// benchmark counted as regret (docs/benchmarks.md): a job routed on this
// estimate now carries the latest start that keeps it, and fair sharing
// goes ahead of it only until then (FairQueue's rule 3).

#include <optional>
#include <vector>

#include "scheduler/execution/start_reservations.h"

namespace infergate {

struct DeviceLoad {
  // The threads that could run the job, busy or idle (with fair sharing the
  // fair-share thread too, started or due).
  int threads = 1;
  // Each running batch: how long until it is expected to end, at least 0
  // (0 for one that ran past its estimate or has answered).
  std::vector<double> busy_us;
  // The waiting jobs' expected compute.
  double queued_us = 0;
  // The job's flow runs all the batches it may: when the first of them is
  // expected to end. Unset when it may run another now.
  std::optional<double> flow_free_us;
  // The reservations standing there (rule 4), in any order.
  std::vector<StartReservation> reserved;
  // The job's own expected compute (0: unknown, so it fits before no
  // reservation).
  double job_us = 0;
};

// Microseconds from now until the job would start (rules 1-4).
double ExpectedStartUs(const DeviceLoad& load);

}  // namespace infergate
