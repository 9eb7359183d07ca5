// The demand meter: a steady rate settles at itself, a burst shows at
// once, an idle model decays away and is forgotten.
#include "scheduler/routing/demand_meter.h"

#include <gtest/gtest.h>

#include <cmath>

namespace infergate {
namespace {

using std::chrono::milliseconds;

TEST(DemandMeter, ASteadyRateSettlesAtItselfAndAnIdleOneDecays) {
  DemandMeter meter(std::chrono::seconds(10));
  DemandMeter::Clock::time_point t{};
  for (int i = 0; i < 2000; ++i) {  // 20 requests per second for 100 s
    t += milliseconds(50);
    meter.Add("steady", 1, t);
  }
  EXPECT_NEAR(meter.Rate("steady", t), 20, 0.6);
  EXPECT_NEAR(meter.Rate("steady", t + std::chrono::seconds(10)), 20 / std::exp(1.0), 0.3);
  EXPECT_LT(meter.Rate("steady", t + std::chrono::seconds(100)), 0.01);
  EXPECT_EQ(meter.Rate("never", t), 0);
}

TEST(DemandMeter, ABurstShowsAtOnceAndIdleModelsAreForgotten) {
  DemandMeter meter(std::chrono::seconds(10));
  DemandMeter::Clock::time_point t{};
  meter.Add("burst", 100, t);
  meter.Add("trickle", 1, t);
  EXPECT_NEAR(meter.Rate("burst", t), 10, 1e-9);
  auto rates = meter.Rates(t);
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_EQ(rates[0].first, "burst");
  rates = meter.Rates(t + std::chrono::seconds(60), 0.01);  // trickle: 0.1 x e^-6 = 0.00025
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_EQ(rates[0].first, "burst");
  EXPECT_EQ(meter.Rate("trickle", t + std::chrono::seconds(60)), 0) << "forgotten";
}

}  // namespace
}  // namespace infergate
