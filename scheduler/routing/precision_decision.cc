#include "scheduler/routing/precision_decision.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace infergate {

absl::string_view AccuracyStateName(AccuracyState state) {
  switch (state) {
    case AccuracyState::kUnchecked: return "unchecked";
    case AccuracyState::kVerified: return "verified";
    case AccuracyState::kInaccurate: return "inaccurate";
  }
  return "unknown";
}

PrecisionDecision DecidePrecision(const PrecisionQuery& q) {
  PrecisionDecision d;
  d.dtype = q.picked;
  const bool reduced = q.picked == DType::kFloat16 || q.picked == DType::kBFloat16;
  if (!reduced) return d;
  const AccuracyState state = q.picked == DType::kFloat16 ? q.fp16 : q.bf16;
  if (state == AccuracyState::kVerified) return d;

  d.about = q.picked;
  d.reason = state == AccuracyState::kUnchecked ? PrecisionReasonKind::kUnverified : PrecisionReasonKind::kInaccurate;
  if (state == AccuracyState::kUnchecked) d.check = q.picked;
  if (q.client_asked && !q.allow_fallback) {
    d.refusal =
        state == AccuracyState::kUnchecked ? absl::StatusCode::kUnavailable : absl::StatusCode::kFailedPrecondition;
    return d;
  }
  const DType other = q.picked == DType::kFloat16 ? DType::kBFloat16 : DType::kFloat16;
  const bool other_available = other == DType::kFloat16 || q.bf16_supported;
  const AccuracyState other_state = other == DType::kFloat16 ? q.fp16 : q.bf16;
  if (other_available && other_state == AccuracyState::kVerified) {
    d.dtype = other;
  } else {
    d.dtype = DType::kFloat32;
    // Look for a 16-bit dtype that serves this model well, once the picked
    // one is known not to.
    if (!d.check && other_available && other_state == AccuracyState::kUnchecked) d.check = other;
  }
  return d;
}

std::string PrecisionReasonText(const PrecisionDecision& decision) {
  switch (decision.reason) {
    case PrecisionReasonKind::kNone: return "";
    case PrecisionReasonKind::kUnverified:
      return absl::StrCat("unverified:", absl::AsciiStrToLower(DTypeName(decision.about)));
    case PrecisionReasonKind::kInaccurate:
      return absl::StrCat("inaccurate:", absl::AsciiStrToLower(DTypeName(decision.about)));
  }
  return "";
}

}  // namespace infergate
