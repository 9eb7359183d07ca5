#pragma once
// Which dtype a request runs in once the accuracy contract has had its say:
// a policy as a pure function of what the precision policy picked, what the
// client asked and what the accuracy checks found on the device. The route
// planner applies it; precision_decision_test.cc tests it by its table.
//
//   picked dtype   its check    client asked it, DENY   otherwise
//   FP32 / FP64    -            runs                    runs
//   FP16 / BF16    verified     runs                    runs
//   FP16 / BF16    not yet run  UNAVAILABLE (retry)     nearest verified; check it
//   FP16 / BF16    inaccurate   FAILED_PRECONDITION     nearest verified
//
// The nearest verified dtype is the other 16-bit one when the device has it
// and it is verified, else FP32. A request never waits for a check.

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "devices/dtype.h"

namespace infergate {

enum class AccuracyState { kUnchecked, kVerified, kInaccurate };

absl::string_view AccuracyStateName(AccuracyState state);  // "unchecked", "verified", "inaccurate"

struct PrecisionQuery {
  DType picked = DType::kFloat32;  // what the precision policy resolved
  bool client_asked = false;       // the client named this precision (not AUTO)
  bool allow_fallback = true;      // the client's fallback policy
  bool bf16_supported = true;      // the device has BF16
  AccuracyState fp16 = AccuracyState::kUnchecked;
  AccuracyState bf16 = AccuracyState::kUnchecked;
};

enum class PrecisionReasonKind { kNone, kUnverified, kInaccurate };

struct PrecisionDecision {
  DType dtype = DType::kFloat32;  // what runs (meaningless when refused)
  // Why `dtype` is not the picked one; `about` is the picked dtype.
  PrecisionReasonKind reason = PrecisionReasonKind::kNone;
  DType about = DType::kFloat32;
  // OK, or the code the request is refused with (the caller words it).
  absl::StatusCode refusal = absl::StatusCode::kOk;
  // A dtype whose check should start now (the checker runs each once).
  std::optional<DType> check;
  friend bool operator==(const PrecisionDecision&, const PrecisionDecision&) = default;
};

PrecisionDecision DecidePrecision(const PrecisionQuery& query);

// The wire form of a decision's reason: "inaccurate:bfloat16",
// "unverified:float16"; empty for none.
std::string PrecisionReasonText(const PrecisionDecision& decision);

}  // namespace infergate
