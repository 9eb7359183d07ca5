#include "common/logging.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

TEST(SuppressedNote, SaysHowManyLinesWereHeldBackAndNothingForNone) {
  EXPECT_EQ(SuppressedNote(0), "");
  EXPECT_EQ(SuppressedNote(1), " (1 similar lines suppressed)");
  EXPECT_EQ(SuppressedNote(1234), " (1234 similar lines suppressed)");
}

}  // namespace
}  // namespace infergate
