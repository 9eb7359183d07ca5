#include "scheduler/model/fallback_reason.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

TEST(FallbackReason, WireFormRoundTripsForEveryKind) {
  const FallbackReason reasons[] = {
      {FallbackKind::kDeviceUnavailable, "cuda:7"},
      {FallbackKind::kDeviceOutOfService, "cuda:0"},
      {FallbackKind::kDeviceNotAllowed, "mps"},
      {FallbackKind::kUnsupportedOp, "aten::max_pool2d"},
      {FallbackKind::kDtype, "float64"},
      {FallbackKind::kOutOfMemory, ""},
      {FallbackKind::kDeviceError, "cuda:1"},
  };
  for (const FallbackReason& r : reasons) {
    std::optional<FallbackReason> back = FallbackReason::Parse(r.ToString());
    ASSERT_TRUE(back.has_value()) << r.ToString();
    EXPECT_EQ(*back, r);
  }
  EXPECT_EQ((FallbackReason{FallbackKind::kUnsupportedOp, "aten::x"}.ToString()), "unsupported_op:aten::x");
  EXPECT_EQ((FallbackReason{FallbackKind::kOutOfMemory, ""}.ToString()), "oom");
  for (const char* bad : {"", "oops", "dtype:", "unsupported_opaten::x", ":x"}) {
    EXPECT_FALSE(FallbackReason::Parse(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace infergate
