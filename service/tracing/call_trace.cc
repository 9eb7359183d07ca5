#include "service/tracing/call_trace.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "opentelemetry/trace/span_context.h"
#include "opentelemetry/trace/span_startoptions.h"

namespace infergate {

namespace otel = opentelemetry;
using otel::nostd::shared_ptr;

namespace {

constexpr size_t kMaxMessage = 256;

// The identity of `span` in the core's terms.
TraceSpanRef RefOf(const otel::trace::SpanContext& context) {
  TraceSpanRef ref;
  context.trace_id().CopyBytesTo(ref.trace_id);
  context.span_id().CopyBytesTo(ref.span_id);
  ref.sampled = context.IsSampled();
  return ref;
}

otel::trace::SpanContext ContextOf(const TraceSpanRef& ref) {
  return otel::trace::SpanContext(otel::trace::TraceId(ref.trace_id), otel::trace::SpanId(ref.span_id),
                                  otel::trace::TraceFlags(ref.sampled ? otel::trace::TraceFlags::kIsSampled : 0),
                                  /*is_remote=*/false);
}

// gRPC server spans are errors for these codes only; the rest are the
// client's doing (OpenTelemetry's RPC conventions).
bool GrpcServerError(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDataLoss: return true;
    default: return false;
  }
}

std::string Clip(absl::string_view message) { return std::string(message.substr(0, kMaxMessage)); }

}  // namespace

CallTrace::CallTrace(shared_ptr<otel::trace::Tracer> tracer, shared_ptr<otel::trace::Span> server_span,
                     const CallTraceStart& start, const ClockAnchor& anchor)
    : tracer_(std::move(tracer)),
      server_(std::move(server_span)),
      transport_(start.transport),
      http_status_for_(start.http_status_for),
      recording_(server_->IsRecording()),
      record_(recording_ ? std::make_shared<RequestTrace>(RefOf(server_->GetContext())) : nullptr),
      anchor_(anchor),
      started_(start.received) {}

CallTrace::~CallTrace() {
  // A call dropped without an end (the transport went away first) still
  // closes its span.
  if (!ended_) End(absl::CancelledError("the call ended without an answer"), nullptr, Clock::now());
}

std::string CallTrace::trace_id_hex() const {
  char hex[otel::trace::TraceId::kSize * 2];
  server_->GetContext().trace_id().ToLowerBase16(hex);
  return std::string(hex, sizeof(hex));
}

void CallTrace::Admitted(Clock::time_point at, const absl::Status& outcome) {
  if (!recording_) return;
  admitted_ = at;
  admission_ = outcome;
}

void CallTrace::Submitted(const InferenceRequest& request, Clock::time_point at) {
  submitted_ = at;
  if (!recording()) return;
  server_->SetAttribute("infergate.device.requested", request.device.empty() ? "auto" : request.device);
  if (!request.version.empty()) server_->SetAttribute("infergate.model.version.requested", request.version);
  server_->SetAttribute("infergate.precision.requested", std::string(PrecisionName(request.precision)));
  if (request.priority) server_->SetAttribute("infergate.priority", static_cast<int64_t>(request.priority));
}

void CallTrace::Encoded(Clock::time_point start, Clock::time_point end) {
  encoded_ = true;
  encode_start_ = start;
  encode_end_ = end;
}

otel::trace::StartSpanOptions CallTrace::ChildOptions(Clock::time_point start,
                                                      const otel::trace::SpanContext& parent) const {
  otel::trace::StartSpanOptions options;
  options.parent = parent;
  options.kind = otel::trace::SpanKind::kInternal;
  options.start_steady_time = otel::common::SteadyTimestamp(start);
  options.start_system_time = otel::common::SystemTimestamp(anchor_.ToSystem(start));
  return options;
}

shared_ptr<otel::trace::Span> CallTrace::Child(const char* name, Clock::time_point start,
                                               const otel::trace::SpanContext& parent) {
  return tracer_->StartSpan(name, ChildOptions(start, parent));
}

void CallTrace::EndAt(otel::trace::Span& span, Clock::time_point end) {
  otel::trace::EndSpanOptions options;
  options.end_steady_time = otel::common::SteadyTimestamp(end);
  span.End(options);
}

void CallTrace::AddAttempts(Clock::time_point call_end) {
  const otel::trace::SpanContext server = server_->GetContext();
  const std::vector<RequestTrace::Attempt> attempts = record_->Attempts();
  for (size_t i = 0; i < attempts.size(); ++i) {
    const RequestTrace::Attempt& a = attempts[i];
    // An attempt ends where its run ended, where the next began, or with
    // the call (refused in the queue, or failed while loading).
    Clock::time_point end = a.ran ? a.outputs_split : i + 1 < attempts.size() ? attempts[i + 1].enqueued : call_end;
    if (end < a.enqueued) end = a.enqueued;
    shared_ptr<otel::trace::Span> attempt = Child("infergate.attempt", a.enqueued, server);
    attempt->SetAttribute("infergate.attempt", static_cast<int64_t>(i + 1));
    attempt->SetAttribute("infergate.device", a.device);
    attempt->SetAttribute("infergate.priority", static_cast<int64_t>(a.priority));
    if (!a.dtype.empty()) attempt->SetAttribute("infergate.dtype", a.dtype);
    if (!a.ready_path.empty()) {
      attempt->SetAttribute("infergate.ready_path", a.ready_path);
      attempt->SetAttribute("infergate.ready_path.expected_us", static_cast<int64_t>(a.expected_us));
      if (a.load_expected_us > 0) {
        attempt->SetAttribute("infergate.ready_path.load_us", static_cast<int64_t>(a.load_expected_us));
      }
    }
    if (!a.fallback_reason.empty()) {
      attempt->SetAttribute("infergate.fallback_reason", a.fallback_reason);
      server_->AddEvent("infergate.fallback", otel::common::SystemTimestamp(anchor_.ToSystem(a.enqueued)),
                        {{"infergate.fallback_reason", a.fallback_reason},
                         {"infergate.device", a.device},
                         {"infergate.device.from", i > 0 ? attempts[i - 1].device : std::string("")}});
    }
    if (!a.failure.empty()) attempt->SetStatus(otel::trace::StatusCode::kError, Clip(a.failure));
    const otel::trace::SpanContext parent = attempt->GetContext();

    const Clock::time_point dequeued = a.started ? a.dequeued : end;
    shared_ptr<otel::trace::Span> queue = Child("infergate.queue", a.enqueued, parent);
    queue->SetAttribute("infergate.device", a.device);
    queue->SetAttribute("infergate.queue_us", static_cast<int64_t>(MicrosBetween(a.enqueued, dequeued)));
    if (!a.started && i + 1 == attempts.size())
      queue->SetStatus(otel::trace::StatusCode::kError, "left the queue unrun");
    EndAt(*queue, dequeued);
    if (a.held) {
      // Load on arrival: the first part of the queue span was the hold.
      shared_ptr<otel::trace::Span> hold = Child("infergate.arrival_load", a.enqueued, parent);
      hold->SetAttribute("infergate.device", a.device);
      EndAt(*hold, std::max(a.enqueued, std::min(a.released, dequeued)));
    }
    if (a.started && a.waited_for_load) {
      shared_ptr<otel::trace::Span> load = Child("infergate.model_load", a.dequeued, parent);
      load->SetAttribute("infergate.device", a.device);
      if (!a.ran && !a.failure.empty() && a.failure.rfind("loading", 0) == 0) {
        load->SetStatus(otel::trace::StatusCode::kError, Clip(a.failure));
      }
      EndAt(*load, a.model_ready);
    }
    if (a.ran) {
      std::vector<std::pair<otel::trace::SpanContext, std::map<std::string, std::string>>> links;
      links.reserve(a.companions.size());
      for (const TraceSpanRef& companion : a.companions) {
        links.emplace_back(ContextOf(companion), std::map<std::string, std::string>{{"infergate.link", "batch"}});
      }
      shared_ptr<otel::trace::Span> batch = tracer_->StartSpan(
          "infergate.batch",
          std::map<std::string, int64_t>{{"infergate.batch_size", static_cast<int64_t>(a.batch_rows)},
                                         {"infergate.batch.requests", static_cast<int64_t>(a.batch_requests)}},
          links, ChildOptions(a.model_ready, parent));
      EndAt(*batch, a.inputs_joined);
      shared_ptr<otel::trace::Span> compute = Child("infergate.compute", a.inputs_joined, parent);
      compute->SetAttribute("infergate.device", a.device);
      compute->SetAttribute("infergate.dtype", a.dtype);
      compute->SetAttribute("infergate.compute_us", static_cast<int64_t>(MicrosBetween(a.inputs_joined, a.computed)));
      EndAt(*compute, a.computed);
      shared_ptr<otel::trace::Span> outputs = Child("infergate.outputs", a.computed, parent);
      EndAt(*outputs, a.outputs_split);
    }
    EndAt(*attempt, end);
  }
}

void CallTrace::End(const absl::Status& status, const InferenceResult* result, Clock::time_point at) {
  if (ended_) return;
  ended_ = true;
  if (!recording()) {
    server_->End();
    return;
  }
  const otel::trace::SpanContext server = server_->GetContext();
  if (admitted_ != Clock::time_point{}) {
    shared_ptr<otel::trace::Span> admission = Child("infergate.admission", started_, server);
    if (!admission_.ok()) admission->SetStatus(otel::trace::StatusCode::kError, Clip(admission_.message()));
    EndAt(*admission, admitted_);
    if (admission_.ok()) {
      // Between admission and the core (or the refusal of what was sent).
      shared_ptr<otel::trace::Span> decode = Child("infergate.decode", admitted_, server);
      const bool reached_core = submitted_ != Clock::time_point{};
      if (!reached_core && !status.ok()) decode->SetStatus(otel::trace::StatusCode::kError, Clip(status.message()));
      EndAt(*decode, reached_core ? submitted_ : at);
    }
  }
  AddAttempts(at);
  if (encoded_) {
    shared_ptr<otel::trace::Span> encode = Child("infergate.encode", encode_start_, server);
    if (!status.ok() && result == nullptr) encode->SetStatus(otel::trace::StatusCode::kError, Clip(status.message()));
    EndAt(*encode, encode_end_);
  }
  if (result) {
    const Placement& p = result->placement;
    server_->SetAttribute("infergate.device", p.device);
    server_->SetAttribute("infergate.dtype", std::string(DTypeName(p.dtype)));
    server_->SetAttribute("infergate.model.version", p.model_version);
    server_->SetAttribute("infergate.batch_size", static_cast<int64_t>(p.batch_size));
    server_->SetAttribute("infergate.fell_back", p.fell_back);
    if (!p.fallback_reason.empty()) server_->SetAttribute("infergate.fallback_reason", p.fallback_reason);
    if (!p.precision_reason.empty()) server_->SetAttribute("infergate.precision_reason", p.precision_reason);
    server_->SetAttribute("infergate.queue_us", static_cast<int64_t>(result->timing.queue_us));
    server_->SetAttribute("infergate.compute_us", static_cast<int64_t>(result->timing.compute_us));
  }
  bool error = false;
  if (transport_ == CallTransport::kGrpc) {
    server_->SetAttribute("rpc.grpc.status_code", static_cast<int64_t>(status.code()));
    error = GrpcServerError(status.code());
  } else {
    const int http = status.ok() ? 200 : http_status_for_ ? http_status_for_(status) : 500;
    server_->SetAttribute("http.response.status_code", static_cast<int64_t>(http));
    error = http >= 500;
  }
  if (!status.ok()) {
    server_->SetAttribute("error.type", absl::StatusCodeToString(status.code()));
    server_->SetStatus(error ? otel::trace::StatusCode::kError : otel::trace::StatusCode::kUnset,
                       error ? Clip(status.message()) : "");
  }
  EndAt(*server_, at);
}

}  // namespace infergate
