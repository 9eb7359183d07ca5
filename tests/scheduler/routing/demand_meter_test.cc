// The demand meter: a steady rate settles at itself, an idle model decays
// away and is forgotten, and a step in demand (up, down, a new model) is
// followed within seconds by change detection, which steady demand rarely
// sets off.
#include "scheduler/routing/demand_meter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace infergate {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = DemandMeter::Clock;

DemandMeter::Options Window10s(double change_threshold) {
  DemandMeter::Options o;
  o.window = seconds(10);
  o.change_threshold = change_threshold;
  return o;
}

TEST(DemandMeter, ASteadyRateSettlesAtItselfAndAnIdleOneDecays) {
  DemandMeter meter(Window10s(0));
  Clock::time_point t{};
  for (int i = 0; i < 2000; ++i) {  // 20 requests per second for 100 s
    t += milliseconds(50);
    meter.Add("steady", 1, t);
  }
  EXPECT_NEAR(meter.Rate("steady", t), 20, 0.6);
  EXPECT_NEAR(meter.Rate("steady", t + seconds(10)), 20 / std::exp(1.0), 0.3);
  EXPECT_LT(meter.Rate("steady", t + seconds(100)), 0.01);
  EXPECT_EQ(meter.Rate("never", t), 0);
  EXPECT_EQ(meter.changes(), 0u);
}

TEST(DemandMeter, ABurstShowsAtOnceAndIdleModelsAreForgotten) {
  DemandMeter meter(Window10s(0));
  Clock::time_point t{};
  meter.Add("burst", 100, t);
  meter.Add("trickle", 1, t);
  EXPECT_NEAR(meter.Rate("burst", t), 10, 1e-9);
  auto rates = meter.Rates(t);
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_EQ(rates[0].first, "burst");
  rates = meter.Rates(t + seconds(60), 0.01);  // trickle: 0.1 x e^-6 = 0.00025
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_EQ(rates[0].first, "burst");
  EXPECT_EQ(meter.Rate("trickle", t + seconds(60)), 0) << "forgotten";
}

// Poisson arrivals at `rate` per second over [from, to), in order.
std::vector<Clock::time_point> Arrivals(double rate, Clock::time_point from, Clock::time_point to,
                                        std::mt19937_64& random) {
  std::exponential_distribution<double> gap(rate);
  std::vector<Clock::time_point> out;
  for (Clock::time_point t = from;;) {
    t += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap(random)));
    if (t >= to) return out;
    out.push_back(t);
  }
}

// Feeds `arrivals` of "m" to `meter` and reads its rate every `step` from
// `from` to `to`, in time order, as the placement controller would; calls
// `read(t, rate)` for each read.
template <typename Read>
void Replay(DemandMeter& meter, const std::vector<Clock::time_point>& arrivals, Clock::time_point from,
            Clock::time_point to, Clock::duration step, Read read) {
  auto next = arrivals.begin();
  for (Clock::time_point t = from; t < to; t += step) {
    for (; next != arrivals.end() && *next <= t; ++next) meter.Add("m", 1, *next);
    read(t, meter.Rate("m", t));
  }
}

// A step change: 5 requests a second falling to 0.3, and 0.3 rising to 5,
// each after 60 s of steady demand, in 20 random runs; how long until the
// rate read is first within a factor of 1.5 of the new rate. Without
// detection the decaying rate takes one to several windows; with it, a few
// seconds.
TEST(DemandMeter, FollowsAStepChangeWithinSecondsWhereTheDecayingRateTakesWindows) {
  struct Row {
    double before, after;
    double threshold;
    double mean_at_least_s, mean_at_most_s;
  };
  // clang-format off: a table, one row a line
  const Row rows[] = {
      {5, 0.3, 5, 0, 12},   // a fall, with detection: about 10 s (3 to detect it, then the few arrivals)
      {5, 0.3, 0, 25, 60},  //         without: more than 30 s
      {0.3, 5, 5, 0, 4},    // a rise, with detection: about 3 s
      {0.3, 5, 0, 8, 60},   //         without: about a window
  };
  // clang-format on
  for (const Row& row : rows) {
    double total = 0;
    const int kRuns = 20;
    for (int run = 0; run < kRuns; ++run) {
      std::mt19937_64 random(1000 + run);
      DemandMeter meter(Window10s(row.threshold));
      const Clock::time_point start{}, step = start + seconds(60), end = step + seconds(60);
      std::vector<Clock::time_point> arrivals = Arrivals(row.before, start, step, random);
      for (Clock::time_point t : Arrivals(row.after, step, end, random)) arrivals.push_back(t);
      double until = 60;
      Replay(meter, arrivals, start, end, milliseconds(100), [&](Clock::time_point t, double rate) {
        rate = std::max(rate, 1e-6);
        if (t < step || until < 60) return;
        if (std::abs(std::log(rate / row.after)) < std::log(1.5)) {
          until = std::chrono::duration<double>(t - step).count();
        }
      });
      total += until;
    }
    const double mean = total / kRuns;
    EXPECT_GE(mean, row.mean_at_least_s) << row.before << " -> " << row.after << ", threshold " << row.threshold;
    EXPECT_LE(mean, row.mean_at_most_s) << row.before << " -> " << row.after << ", threshold " << row.threshold;
  }
}

// A brand-new model's demand is known once a few of its requests arrived,
// not after a window.
TEST(DemandMeter, ANewModelsRateIsCountedOnceTheEvidenceIsIn) {
  DemandMeter meter(Window10s(5)), slow(Window10s(0));
  Clock::time_point t{};
  for (int i = 0; i < 10; ++i) {  // 5 requests a second for 2 s
    t += milliseconds(200);
    meter.Add("new", 1, t);
    slow.Add("new", 1, t);
  }
  EXPECT_GE(meter.changes(), 1u);
  EXPECT_NEAR(meter.Rate("new", t), 5, 1.5);
  EXPECT_NEAR(slow.Rate("new", t), 1, 0.1) << "without detection: 10 requests / 10 s, the window's count";
}

// Steady demand: few false alarms, and the estimate no further from the
// rate than the decaying rate's alone by much.
TEST(DemandMeter, SteadyDemandRarelySetsOffDetection) {
  for (double rate : {0.5, 2.0, 20.0}) {
    std::mt19937_64 random(7);
    const Clock::time_point start{}, end = start + seconds(600);
    const std::vector<Clock::time_point> arrivals = Arrivals(rate, start, end, random);
    double log_error[2] = {0, 0};  // without, with detection
    for (int with : {0, 1}) {
      DemandMeter meter(Window10s(with ? 5 : 0));
      Replay(meter, arrivals, start, end, seconds(1), [&](Clock::time_point t, double r) {
        if (t >= start + seconds(60)) log_error[with] += std::abs(std::log(std::max(r, 1e-6) / rate));
      });
      if (with) {
        EXPECT_LE(meter.changes(), 25u) << rate << "/s over 10 minutes";
      }
    }
    EXPECT_LT(log_error[1], 1.5 * log_error[0]) << rate << "/s: the mean error in ln(rate), with detection "
                                                << log_error[1] / 540 << ", without " << log_error[0] / 540;
  }
}

// A steady rate high enough that the evidence of a rise is in within a
// fraction of the minimum interval is read as itself: the test keeps
// counting until the interval is complete (taken at once, 96 requests a
// second were read as 15, the threshold's worth per interval, and set off
// detection seven times a second).
TEST(DemandMeter, AHighSteadyRateIsReadAsItselfNotAsTheThresholdsWorthPerInterval) {
  for (double rate : {50.0, 96.0, 400.0}) {
    DemandMeter meter(Window10s(5));
    Clock::time_point t{};
    const auto gap = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1 / rate));
    for (int i = 0; i < static_cast<int>(rate * 30); ++i) {
      t += gap;
      meter.Add("busy", 1, t);
    }
    EXPECT_NEAR(meter.Rate("busy", t), rate, 0.05 * rate) << rate << "/s for 30 s";
    EXPECT_LE(meter.changes(), 3u) << rate << "/s for 30 s: one rise from nothing, not one every fraction of a second";
  }
}

// A burst in one instant is counted over the minimum interval, not as an
// unbounded rate, and falls back once the arrivals stop.
TEST(DemandMeter, ABurstInOneInstantIsCountedOverTheMinimumInterval) {
  DemandMeter meter(Window10s(5));
  Clock::time_point t{};
  meter.Add("burst", 100, t);
  EXPECT_NEAR(meter.Rate("burst", t), 100, 1e-9) << "100 requests over the 1 s minimum";
  EXPECT_LT(meter.Rate("burst", t + seconds(5)), 1) << "nothing since: the fall was detected";
}

}  // namespace
}  // namespace infergate
