#include "service/call/http_call.h"

#include <chrono>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service/tracing/call_trace_start.h"

namespace infergate {

int HttpStatusFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted: return 409;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnimplemented: return 501;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

void TraceHttpCall(InferCall& call, const HttpRequest& request, absl::string_view span_name, absl::string_view model) {
  CallTraceStart start;
  start.transport = CallTransport::kHttp;
  start.span_name = span_name;
  start.http_route = span_name.substr(5);  // past "POST "
  start.url_path = request.path;
  start.http_status_for = HttpStatusFor;
  start.model = model;
  call.Trace(start, [&request](absl::string_view name) { return request.Header(name); });
}

absl::StatusOr<Clock::time_point> RestDeadline(const HttpRequest& request, Clock::time_point received) {
  const absl::string_view header = request.Header(kDeadlineHeader);
  if (header.empty()) return Clock::time_point::max();
  uint64_t ms = 0;
  if (!absl::SimpleAtoi(header, &ms) || ms == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kDeadlineHeader, ": '", header.substr(0, 32), "' is not a positive count of milliseconds"));
  }
  // Past about 292 years the steady clock overflows: no deadline.
  if (ms > uint64_t{1} << 52) return Clock::time_point::max();
  return received + std::chrono::milliseconds(ms);
}

std::shared_ptr<void> HoldAnswer(InflightBudget* budget, uint64_t bytes) {
  if (budget == nullptr) return nullptr;
  return std::make_shared<InflightBudget::Reservation>(budget->Hold(bytes));
}

}  // namespace infergate
