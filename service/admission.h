#pragma once
// What every front end (gRPC and REST) does before an inference request
// reaches the core: check the caller's token, refuse while draining, and
// reserve the request's bytes in the in-flight budget; and how a refusal is
// counted. Transport-neutral: the front ends map the status to their codes.

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/inference_types.h"
#include "service/auth.h"
#include "service/inflight_budget.h"
#include "service/metrics.h"

namespace infergate {

// `authorization` reads the request's "Bearer ..." value ("" if none), and
// is called only when a token is needed. The reservation (empty when
// `budget` is null) must be held until the answer is sent. Refusals for
// draining and budget are counted in `metrics` (may be null).
absl::StatusOr<InflightBudget::Reservation> Admit(const TokenAuth& auth,
                                                  absl::FunctionRef<absl::string_view()> authorization,
                                                  bool draining, Metrics* metrics, InflightBudget* budget,
                                                  uint64_t bytes);

// Counts a request refused before it reached the core under `model_label`
// (a repository model or "").
void RecordRefusal(Metrics* metrics, const absl::Status& status, const std::string& model_label,
                   Clock::time_point received);

}  // namespace infergate
