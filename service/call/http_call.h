#pragma once
// What an inference call over HTTP needs whatever the REST protocol it came
// by (the Open Inference Protocol's, TorchServe's, KServe V1's): its
// deadline header, the HTTP status for a call's outcome, and its trace
// started from the request's headers. Shared so that the REST front ends
// need not include one another.
//
// Pure functions (TraceHttpCall acts on the call it is given); thread-safe.

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/model/inference_types.h"
#include "service/call/infer_call.h"
#include "service/http/http_server.h"

namespace infergate {

// The request header that bounds how long a REST inference call may take,
// in milliseconds: the deadline gRPC clients send as `grpc-timeout`. Envoy
// (and so Istio, in front of KServe) sends it with a route's timeout; any
// client may. Past it a queued request is dropped with 504.
inline constexpr char kDeadlineHeader[] = "x-envoy-expected-rq-timeout-ms";

// The deadline `request` asks for (max() with none), counted from `received`;
// INVALID_ARGUMENT naming the header for a value that is not a positive
// count of milliseconds.
absl::StatusOr<Clock::time_point> RestDeadline(const HttpRequest& request, Clock::time_point received);

// The HTTP status for a core or codec status: 400 bad request (and failed
// precondition, out of range), 401/403 token, 404 unknown, 409 conflict,
// 429 queue or budget full, 501 not served, 503 draining (or cancelled),
// 504 deadline, 500 anything else.
int HttpStatusFor(const absl::Status& status);

// Counts an encoded answer of `bytes` in `budget` (null: none) while it is
// written: set as the HttpResponse's `held`. Held, never refused: the
// answer is computed (InflightBudget::Hold).
std::shared_ptr<void> HoldAnswer(InflightBudget* budget, uint64_t bytes);

// Starts `call`'s trace as an HTTP call (when the front end traces): the
// span `span_name` ("POST <route>", a constant), the route, the path, the
// caller's trace headers.
void TraceHttpCall(InferCall& call, const HttpRequest& request, absl::string_view span_name, absl::string_view model);

}  // namespace infergate
