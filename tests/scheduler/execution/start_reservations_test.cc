// Whether a job may start before the requests held for their loads
// (start_reservations.h), as one table: the job's expected compute, the
// threads, the running batches' time left and the reservations that bind
// it in; whether it may start out.

#include "scheduler/execution/start_reservations.h"

#include <gtest/gtest.h>

#include <vector>

namespace infergate {
namespace {

TEST(StartReservations, Table) {
  constexpr double kTask = 1e18;  // a running task: its end is not estimated
  // clang-format off: a table, one row a line
  struct ReservationRow { const char* why; double job; int threads; std::vector<double> busy; std::vector<StartReservation> reserved; bool may_start; };
  const ReservationRow rows[] = {
      {"no reservation: starts",                                 30'000, 1, {},                {},                              true},
      {"one idle thread owed in 10 ms, a 30 ms job: waits",      30'000, 1, {},                {{10'000, 20'000}},              false},
      {"one idle thread owed in 40 ms, a 30 ms job: fits before", 30'000, 1, {},               {{40'000, 20'000}},              true},
      {"due exactly at the job's end: fits",                     30'000, 1, {},                {{30'000, 20'000}},              true},
      {"two threads, the other free then: starts",               30'000, 2, {},                {{10'000, 20'000}},              true},
      {"two threads, the other busy past the due time: waits",   30'000, 2, {50'000},          {{10'000, 20'000}},              false},
      {"two threads, the other done before it is due: starts",   30'000, 2, {5'000},           {{10'000, 20'000}},              true},
      {"a running task holds its thread: waits",                 30'000, 2, {kTask},           {{10'000, 20'000}},              false},
      {"overdue counts as due now: waits",                       30'000, 1, {},                {{-3'000, 20'000}},              false},
      {"two owed, the first's run over when the second is due: a thread for each in turn, starts",
                                                                 90'000, 2, {},                {{10'000, 5'000}, {20'000, 5'000}}, true},
      {"two owed, the first still running when the second is due: waits",
                                                                 90'000, 2, {},                {{10'000, 20'000}, {20'000, 5'000}}, false},
      {"two owed at once, two threads: waits",                   90'000, 2, {},                {{10'000, 5'000}, {10'000, 5'000}}, false},
      {"two owed at once, three threads: starts",                90'000, 3, {},                {{10'000, 5'000}, {10'000, 5'000}}, true},
      {"a job of unknown compute starts",                        0,      1, {},                {{10'000, 20'000}},              true},
      {"no threads named: one",                                  30'000, 0, {},                {{10'000, 20'000}},              false},
  };
  // clang-format on
  for (const ReservationRow& row : rows) {
    EXPECT_EQ(MayStartBeforeReservations(row.job, row.threads, row.busy, row.reserved), row.may_start) << row.why;
  }
}

}  // namespace
}  // namespace infergate
