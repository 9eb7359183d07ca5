// When a job submitted now would start (start_estimate.h), as one table:
// the threads, their running batches' remaining time, the queued work, the
// flow's running limit and the reservations of requests held for their
// loads (with the job's own compute) in; the start out.

#include "scheduler/execution/start_estimate.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace infergate {
namespace {

TEST(StartEstimate, Table) {
  // clang-format off: a table, one row a line
  struct Row { const char* why; int threads; std::vector<double> busy; double queued; std::optional<double> flow_free; double start;
               std::vector<StartReservation> reserved = {}; double job = 0; };
  const Row rows[] = {
      {"idle",                                          1, {},              0,      {},       0},
      {"one thread, one run 30 ms from its end",        1, {30'000},        0,      {},       30'000},
      {"one thread: what runs, then what waits",        1, {30'000},        20'000, {},       50'000},
      {"a run past its estimate holds nothing",         1, {-5'000},        0,      {},       0},
      {"two threads, one free: at once",                2, {30'000},        0,      {},       0},
      {"two threads, one free, 10 ms queued: the free one takes it, the job waits for it",
                                                        2, {30'000},        10'000, {},       10'000},
      {"two threads, one free, 50 ms queued: both take it, level (50+30)/2",
                                                        2, {30'000},        50'000, {},       40'000},
      {"two idle threads, 10 ms queued: spread over both (the work taken as divisible)",
                                                        2, {},              10'000, {},       5'000},
      {"two busy threads: the earlier",                 2, {30'000, 10'000}, 0,     {},       10'000},
      {"two busy threads, 30 ms queued: level (30+10+30)/2",
                                                        2, {30'000, 10'000}, 30'000, {},      35'000},
      {"its flow at its limit on the other thread",     2, {30'000},        0,      30'000.0, 30'000},
      {"the flow's limit later than the queue's level", 3, {5'000, 40'000}, 0,      40'000.0, 40'000},
      {"more runs than threads (a grown model's)",      1, {20'000, 10'000}, 0,     {},       10'000},
      {"no threads named: one",                         0, {},              7'000,  {},       7'000},
      // Rule 4: {due in, runs for} of each request held for its load.
      {"a reservation due in 8 ms that runs 9 ms holds the thread until 17 ms, not 9",
                                                        1, {},              0,      {},       17'000, {{8'000, 9'000}}},
      {"two threads, one busy 28 ms: the reservation takes the free one from 8 ms to 17 ms",
                                                        2, {28'000},        0,      {},       17'000, {{8'000, 9'000}}},
      {"a job done before the reservation falls due goes first",
                                                        1, {},              0,      {},       0,      {{20'000, 10'000}}, 5'000},
      {"a job that would not be: after the reservation's run",
                                                        1, {},              0,      {},       30'000, {{20'000, 10'000}}, 25'000},
      {"a job of unknown compute fits before none",     1, {},              0,      {},       30'000, {{20'000, 10'000}}},
      {"an overdue reservation binds as one due now",   1, {},              0,      {},       9'000,  {{-3'000, 9'000}}},
      {"a reservation due after its thread frees: from when it falls due",
                                                        1, {5'000},         0,      {},       12'000, {{10'000, 2'000}}},
      {"in the order they fall due, each on the thread free earliest",
                                                        2, {},              0,      {},       15'000, {{10'000, 5'000}, {2'000, 30'000}}},
      {"the queued work after the reservations",        1, {5'000},         4'000,  {},       11'000, {{1'000, 2'000}}},
  };
  // clang-format on
  for (const Row& row : rows) {
    DeviceLoad load;
    load.threads = row.threads;
    load.busy_us = row.busy;
    load.queued_us = row.queued;
    load.flow_free_us = row.flow_free;
    load.reserved = row.reserved;
    load.job_us = row.job;
    EXPECT_DOUBLE_EQ(ExpectedStartUs(load), row.start) << row.why;
  }
}

}  // namespace
}  // namespace infergate
