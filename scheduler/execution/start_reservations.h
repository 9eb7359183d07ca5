#pragma once
// Whether a job may start now on a device that owes threads to requests
// held for their models' loads: a pure function, so the rule reads (and is
// tested) as one table (tests/scheduler/execution/start_reservations_test.cc).
//
// `auto` sends a request to load and run (ready_path.h) on the estimate
// that, once its load on arrival is done (arrival_loads.h), a thread of
// the device takes it after the work queued ahead of it at its arrival. A
// device does not preempt a run, so work that arrives during the load and
// starts before it is done can take that thread: the request then waits a
// whole run its estimate never counted (the churn benchmark's most common
// late request, docs/benchmarks.md). Each held request therefore leaves a
// reservation on its device (DeviceExecutor::Reserve): when it is due (its
// load's estimate from its arrival) and how long it will run.
//
// The rule:
//  1. A reservation binds only the jobs queued after it was made: their
//     own estimates counted it (DeviceExecutor::LoadFor reports it, and
//     ExpectedStartUs gives it a thread from when it falls due: rule 4 of
//     start_estimate.h). Work queued before it was in the held request's
//     estimate, and starts as it would have. The caller passes the
//     reservations that bind the job.
//  2. A job may start unless, for a reservation that binds it and falls due
//     before the job is expected to end (now plus its expected compute),
//     every thread would be busy when the reservation falls due: the
//     running batches expected to end after that moment, the reservations
//     due before it whose runs are still going then, and the job.
//  3. A job of unknown compute (0: never measured, or a task) may start: no
//     end can be foreseen for it.
//  4. A batch runs as long as its longest job: a companion collected for a
//     job that may start (DeviceExecutor::TakeBatch) is held to (2) as if
//     it started alone when it is expected to run longer than the jobs
//     before it, and waits for a later batch if it may not.
// An overdue reservation (its load ran long) binds as one due now; the
// executor drops it once it is overdue by more than its grace
// (DeviceExecutor::Reserve), so a load far longer than its estimate never
// idles a thread for long.

#include <vector>

namespace infergate {

struct StartReservation {
  double due_in_us = 0;  // from now until its request is expected to be queued (< 0: overdue)
  double run_us = 0;     // its request's expected compute
};

// `busy_us`: each running batch's expected time left (at least 0; a task,
// whose end is not estimated, as a very large number); `threads`: the
// threads that may run work there.
bool MayStartBeforeReservations(double job_us, int threads, const std::vector<double>& busy_us,
                                const std::vector<StartReservation>& reservations);

}  // namespace infergate
