// The accuracy contract's dtype decision as a table: the picked dtype x its
// check x what the client asked, as precision_decision.h lays it out.

#include "scheduler/routing/precision_decision.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

TEST(PrecisionDecision, EveryPickCheckAndClientPolicy) {
  using S = AccuracyState;
  using R = PrecisionReasonKind;
  constexpr DType f32 = DType::kFloat32, f16 = DType::kFloat16, bf16 = DType::kBFloat16, f64 = DType::kFloat64;
  constexpr absl::StatusCode ok = absl::StatusCode::kOk;
  struct Row {
    const char* what;
    PrecisionQuery query;
    PrecisionDecision expected;
  };
  const Row rows[] = {
      {"fp32 is never checked", {f32, true, false, true, S::kInaccurate, S::kInaccurate}, {f32, R::kNone, f32, ok, {}}},
      {"fp64 is never checked", {f64, false, true, true, S::kUnchecked, S::kUnchecked}, {f64, R::kNone, f32, ok, {}}},
      {"verified runs", {f16, true, false, true, S::kVerified, S::kUnchecked}, {f16, R::kNone, f32, ok, {}}},
      {"AUTO, unchecked: fp32 meanwhile, check it",
       {bf16, false, true, true, S::kUnchecked, S::kUnchecked},
       {f32, R::kUnverified, bf16, ok, bf16}},
      {"AUTO, unchecked, the other verified: the other",
       {bf16, false, true, true, S::kVerified, S::kUnchecked},
       {f16, R::kUnverified, bf16, ok, bf16}},
      {"asked, DENY, unchecked: UNAVAILABLE, check it",
       {f16, true, false, true, S::kUnchecked, S::kVerified},
       {f16, R::kUnverified, f16, absl::StatusCode::kUnavailable, f16}},
      {"asked, DENY, inaccurate: FAILED_PRECONDITION",
       {f16, true, false, true, S::kInaccurate, S::kVerified},
       {f16, R::kInaccurate, f16, absl::StatusCode::kFailedPrecondition, {}}},
      {"asked, ALLOW, inaccurate, bf16 verified: bf16",
       {f16, true, true, true, S::kInaccurate, S::kVerified},
       {bf16, R::kInaccurate, f16, ok, {}}},
      {"AUTO, inaccurate, bf16 unchecked: fp32 and check bf16",
       {f16, false, true, true, S::kInaccurate, S::kUnchecked},
       {f32, R::kInaccurate, f16, ok, bf16}},
      {"inaccurate, no bf16 on the device: fp32, nothing to check",
       {f16, false, true, false, S::kInaccurate, S::kUnchecked},
       {f32, R::kInaccurate, f16, ok, {}}},
      {"inaccurate, the other inaccurate too: fp32",
       {bf16, false, true, true, S::kInaccurate, S::kInaccurate},
       {f32, R::kInaccurate, bf16, ok, {}}},
      {"bf16 inaccurate, fp16 verified: fp16",
       {bf16, false, true, true, S::kVerified, S::kInaccurate},
       {f16, R::kInaccurate, bf16, ok, {}}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    EXPECT_EQ(DecidePrecision(row.query), row.expected);
  }
}

TEST(PrecisionDecision, ReasonsAreKindAndDtype) {
  PrecisionDecision d;
  EXPECT_EQ(PrecisionReasonText(d), "");
  d.reason = PrecisionReasonKind::kInaccurate;
  d.about = DType::kBFloat16;
  EXPECT_EQ(PrecisionReasonText(d), "inaccurate:bfloat16");
  d.reason = PrecisionReasonKind::kUnverified;
  d.about = DType::kFloat16;
  EXPECT_EQ(PrecisionReasonText(d), "unverified:float16");
}

}  // namespace
}  // namespace infergate
