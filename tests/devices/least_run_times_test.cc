// A simulated device's least run times (LeastRunTimes): kept per model and
// rows, lowered and never raised.
#include "devices/least_run_times.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

TEST(LeastRunTimes, EachModelAndRowCountKeepsItsLeast) {
  LeastRunTimes times;
  EXPECT_EQ(times.Lower("m/float32", 1, 500), 500u);   // a first run is its own least
  EXPECT_EQ(times.Lower("m/float32", 1, 800), 500u);   // a slower one does not raise it
  EXPECT_EQ(times.Lower("m/float32", 1, 300), 300u);   // a faster one lowers it
  EXPECT_EQ(times.Lower("m/float32", 4, 900), 900u);   // more rows: a count of its own
  EXPECT_EQ(times.Lower("m/bfloat16", 1, 700), 700u);  // another dtype: a model of its own
  EXPECT_EQ(times.Lower("n/float32", 1, 900), 900u);   // another model
}

}  // namespace
}  // namespace infergate
