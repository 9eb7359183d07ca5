#pragma once
// Request tracing for the server: OpenTelemetry's tracer provider with the
// configured sampler and resource, an OTLP exporter (gRPC or HTTP) behind
// a bounded SpanExportQueue, and the start of each inference call's trace
// (call_trace.h) from the caller's W3C `traceparent`/`tracestate`.
//
// Built once by the server when tracing is on; when it is off there is no
// Tracing at all, and a call pays one null check.
//
// Threading: StartCall, the counters and Flush may be called from any
// thread; Shutdown once, after the front ends stopped.

#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "opentelemetry/nostd/shared_ptr.h"
#include "opentelemetry/sdk/trace/tracer_provider.h"
#include "opentelemetry/trace/tracer.h"
#include "scheduler/model/inference_types.h"
#include "service/tracing/call_trace.h"
#include "service/tracing/call_trace_start.h"
#include "service/tracing/trace_settings.h"
#include "service/tracing/tracing_options.h"

namespace infergate {

class SpanExportQueue;

class Tracing {
 public:
  static absl::StatusOr<std::unique_ptr<Tracing>> Create(const TracingOptions& options);
  ~Tracing();

  // Starts the call's server span, a child of the context in the caller's
  // `traceparent` and `tracestate` (`header` answers a lower-case header
  // name, "" when absent; a malformed traceparent is ignored, as W3C
  // says). A call the trace extension's settings (settings()) do not
  // admit gets null first. A call with a caller's trace is sampled as the sampler says
  // (unsampled, it keeps the trace's identity for log lines). A call
  // without one is a root: the sampler's ratio chooses it before any span
  // is made, and an unchosen root gets null (not traced, nothing spent).
  std::unique_ptr<CallTrace> StartCall(const CallTraceStart& start,
                                       absl::FunctionRef<absl::string_view(absl::string_view name)> header);

  // Exports what has ended so far; false if that took longer than `timeout`.
  bool Flush(std::chrono::milliseconds timeout);
  // Exports what is left, within `timeout`, and stops the exporter; later
  // spans are dropped. An export stuck past `timeout` is abandoned to the
  // process's end (its memory deliberately kept), so a collector that
  // never answers cannot hold the server's exit.
  void Shutdown(std::chrono::milliseconds timeout = std::chrono::seconds(2));

  uint64_t spans_exported() const;
  uint64_t spans_dropped() const;        // the export queue was full
  uint64_t spans_failed_export() const;  // the collector refused them or could not be reached

  const TracingOptions& options() const { return options_; }
  // Triton's trace extension's settings (trace_settings.h): every call is
  // offered to the sampler only when they admit it.
  TraceSettings& settings() { return settings_; }

  Tracing(const TracingOptions& options, std::shared_ptr<opentelemetry::sdk::trace::TracerProvider> provider,
          SpanExportQueue* queue);  // use Create

 private:
  const TracingOptions options_;
  std::shared_ptr<opentelemetry::sdk::trace::TracerProvider> provider_;
  SpanExportQueue* const queue_;  // owned by provider_
  const double root_ratio_;       // the share of root calls traced
  TraceSettings settings_{/*exporting=*/true};
  opentelemetry::nostd::shared_ptr<opentelemetry::trace::Tracer> tracer_;
};

}  // namespace infergate
