#include "service/tracing/tracing.h"

#include <random>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "opentelemetry/context/context.h"
#include "opentelemetry/context/propagation/text_map_propagator.h"
#include "opentelemetry/exporters/otlp/otlp_grpc_exporter_factory.h"
#include "opentelemetry/exporters/otlp/otlp_grpc_exporter_options.h"
#include "opentelemetry/exporters/otlp/otlp_http_exporter_factory.h"
#include "opentelemetry/exporters/otlp/otlp_http_exporter_options.h"
#include "opentelemetry/sdk/common/global_log_handler.h"
#include "opentelemetry/sdk/resource/resource.h"
#include "opentelemetry/sdk/trace/samplers/always_off_factory.h"
#include "opentelemetry/sdk/trace/samplers/always_on_factory.h"
#include "opentelemetry/sdk/trace/samplers/parent_factory.h"
#include "opentelemetry/sdk/trace/samplers/trace_id_ratio_factory.h"
#include "opentelemetry/sdk/trace/tracer_provider.h"
#include "opentelemetry/sdk/trace/tracer_provider_factory.h"
#include "opentelemetry/trace/context.h"
#include "opentelemetry/trace/propagation/http_trace_context.h"
#include "opentelemetry/trace/span_startoptions.h"
#include "service/tracing/span_export_queue.h"

namespace infergate {

namespace otel = opentelemetry;
namespace sdktrace = opentelemetry::sdk::trace;

// What a Shutdown that timed out leaves to the export thread still running
// (see Tracing::Shutdown). A global with external linkage, so the store is
// kept and leak checkers see it reachable.
struct AbandonedTracing {
  std::shared_ptr<sdktrace::TracerProvider> provider;
  otel::nostd::shared_ptr<otel::trace::Tracer> tracer;
};
AbandonedTracing* abandoned_tracing = nullptr;

namespace {

// The caller's headers (gRPC metadata or HTTP), read-only.
class HeaderCarrier final : public otel::context::propagation::TextMapCarrier {
 public:
  explicit HeaderCarrier(absl::FunctionRef<absl::string_view(absl::string_view)> header) : header_(header) {}
  otel::nostd::string_view Get(otel::nostd::string_view key) const noexcept override {
    absl::string_view value = header_(absl::string_view(key.data(), key.size()));
    return otel::nostd::string_view(value.data(), value.size());
  }
  void Set(otel::nostd::string_view, otel::nostd::string_view) noexcept override {}

 private:
  absl::FunctionRef<absl::string_view(absl::string_view)> header_;
};

// The SDK's own messages (an export that failed: the collector is slow or
// gone) go to the server's log, at most one a second, instead of a line
// per failed batch on stderr.
class SdkLogHandler final : public otel::sdk::common::internal_log::LogHandler {
 public:
  void Handle(otel::sdk::common::internal_log::LogLevel level, const char*, int, const char* msg,
              const otel::sdk::common::AttributeMap&) noexcept override {
    uint64_t held = 0;
    if (!limiter_.Allow(&held)) return;
    if (level == otel::sdk::common::internal_log::LogLevel::Error) {
      LOG_WARNING << "tracing: " << msg << SuppressedNote(held);
    } else {
      LOG_INFO << "tracing: " << msg << SuppressedNote(held);
    }
  }

 private:
  LogRateLimiter limiter_{1};
};

// The sampler the SDK runs. A call with no caller's trace (a root) was
// already chosen by Tracing::StartCall (the configured ratio, drawn before
// any span exists, so an unchosen call costs nothing), so a root is
// sampled here; a span under one of this server's own spans follows it; a
// caller's trace goes to the configured sampler.
class ChosenRootSampler final : public sdktrace::Sampler {
 public:
  explicit ChosenRootSampler(std::unique_ptr<sdktrace::Sampler> for_callers) : for_callers_(std::move(for_callers)) {}
  sdktrace::SamplingResult ShouldSample(const otel::trace::SpanContext& parent, otel::trace::TraceId trace_id,
                                        otel::nostd::string_view name, otel::trace::SpanKind kind,
                                        const otel::common::KeyValueIterable& attributes,
                                        const otel::trace::SpanContextKeyValueIterable& links) noexcept override {
    if (!parent.IsValid()) {
      return {sdktrace::Decision::RECORD_AND_SAMPLE, nullptr, otel::trace::TraceState::GetDefault()};
    }
    if (!parent.IsRemote()) {
      return {parent.IsSampled() ? sdktrace::Decision::RECORD_AND_SAMPLE : sdktrace::Decision::DROP, nullptr,
              parent.trace_state()};
    }
    return for_callers_->ShouldSample(parent, trace_id, name, kind, attributes, links);
  }
  otel::nostd::string_view GetDescription() const noexcept override { return "infergate"; }

 private:
  std::unique_ptr<sdktrace::Sampler> for_callers_;
};

// The share of calls without a caller's trace that are traced.
double RootRatio(const TracingOptions& o) {
  if (absl::EndsWith(o.sampler, "always_on")) return 1.0;
  if (absl::EndsWith(o.sampler, "always_off")) return 0.0;
  return o.sampler_ratio;
}

// A uniform draw in [0, 1) from a per-thread generator (xorshift64*).
double Draw() {
  thread_local uint64_t state = [] {
    std::random_device seed;
    return (uint64_t{seed()} << 32 | seed()) | 1;
  }();
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return static_cast<double>((state * 0x2545F4914F6CDD1DULL) >> 11) * 0x1.0p-53;
}

std::unique_ptr<sdktrace::Sampler> MakeSampler(const TracingOptions& o) {
  const std::string& name = o.sampler;
  auto base = [&](absl::string_view kind) -> std::unique_ptr<sdktrace::Sampler> {
    if (kind == "always_on") return sdktrace::AlwaysOnSamplerFactory::Create();
    if (kind == "always_off") return sdktrace::AlwaysOffSamplerFactory::Create();
    return sdktrace::TraceIdRatioBasedSamplerFactory::Create(o.sampler_ratio);
  };
  constexpr absl::string_view kParentBased = "parentbased_";
  if (absl::string_view(name).substr(0, kParentBased.size()) == kParentBased) {
    std::shared_ptr<sdktrace::Sampler> root = base(absl::string_view(name).substr(kParentBased.size()));
    return sdktrace::ParentBasedSamplerFactory::Create(root);
  }
  return base(name);
}

std::unique_ptr<sdktrace::SpanExporter> MakeExporter(const TracingOptions& o) {
  if (o.protocol == TracingOptions::Protocol::kHttpProtobuf) {
    otel::exporter::otlp::OtlpHttpExporterOptions http;  // reads OTEL_EXPORTER_OTLP_* (headers, TLS)
    http.url = o.endpoint;
    http.timeout = o.export_timeout;
    // The next batch is the retry: a retry here would hold the export
    // thread while spans pile up (and are dropped) behind it.
    http.retry_policy_max_attempts = 1;
    return otel::exporter::otlp::OtlpHttpExporterFactory::Create(http);
  }
  otel::exporter::otlp::OtlpGrpcExporterOptions grpc;  // reads OTEL_EXPORTER_OTLP_* (headers, TLS)
  grpc.endpoint = o.endpoint;
  grpc.timeout = o.export_timeout;
  grpc.retry_policy_max_attempts = 1;
  // "http://" means plaintext; "https://" TLS (the exporter's own rule).
  if (o.endpoint.rfind("https://", 0) == 0) grpc.use_ssl_credentials = true;
  if (o.endpoint.rfind("http://", 0) == 0) grpc.use_ssl_credentials = false;
  return otel::exporter::otlp::OtlpGrpcExporterFactory::Create(grpc);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tracing>> Tracing::Create(const TracingOptions& options) {
  otel::sdk::common::internal_log::GlobalLogHandler::SetLogHandler(
      otel::nostd::shared_ptr<otel::sdk::common::internal_log::LogHandler>(new SdkLogHandler()));
  otel::sdk::common::internal_log::GlobalLogHandler::SetLogLevel(otel::sdk::common::internal_log::LogLevel::Warning);
  std::unique_ptr<sdktrace::SpanExporter> exporter = MakeExporter(options);
  if (!exporter) return absl::InvalidArgumentError("tracing: the OTLP exporter could not be made");
  SpanExportQueue::Options queue_options;
  queue_options.max_queue_size = options.max_queue_size;
  queue_options.max_export_batch_size = options.max_export_batch_size;
  queue_options.schedule_delay = options.schedule_delay;
  auto queue = std::make_unique<SpanExportQueue>(std::move(exporter), queue_options);
  SpanExportQueue* queue_ptr = queue.get();
  otel::sdk::resource::ResourceAttributes attributes;
  for (const auto& [key, value] : options.resource_attributes) attributes.SetAttribute(key, value);
  attributes.SetAttribute("service.name", options.service_name);
  std::shared_ptr<sdktrace::TracerProvider> provider =
      sdktrace::TracerProviderFactory::Create(std::move(queue), otel::sdk::resource::Resource::Create(attributes),
                                              std::make_unique<ChosenRootSampler>(MakeSampler(options)));
  LOG_INFO << "tracing: OTLP/" << (options.protocol == TracingOptions::Protocol::kGrpc ? "gRPC" : "HTTP") << " to "
           << options.endpoint << ", sampler " << options.sampler
           << (options.sampler.find("traceidratio") != std::string::npos ? absl::StrCat(" ", options.sampler_ratio)
                                                                         : std::string())
           << ", service.name " << options.service_name << ", at most " << options.max_queue_size << " spans queued";
  return std::make_unique<Tracing>(options, std::move(provider), queue_ptr);
}

Tracing::Tracing(const TracingOptions& options, std::shared_ptr<sdktrace::TracerProvider> provider,
                 SpanExportQueue* queue)
    : options_(options),
      provider_(std::move(provider)),
      queue_(queue),
      root_ratio_(RootRatio(options)),
      tracer_(provider_->GetTracer("infergate", INFERGATE_TRACER_VERSION)) {}

Tracing::~Tracing() { Shutdown(); }

std::unique_ptr<CallTrace> Tracing::StartCall(const CallTraceStart& start,
                                              absl::FunctionRef<absl::string_view(absl::string_view name)> header) {
  if (!settings_.Admit(start.model)) return nullptr;  // the trace extension's level, rate and count
  otel::trace::StartSpanOptions options;
  options.kind = otel::trace::SpanKind::kServer;
  bool has_parent = false;
  if (!header("traceparent").empty()) {
    HeaderCarrier carrier(header);
    otel::context::Context empty;
    otel::context::Context parent = otel::trace::propagation::HttpTraceContext().Extract(carrier, empty);
    has_parent = otel::trace::GetSpan(parent)->GetContext().IsValid();  // a malformed one is ignored
    if (has_parent) options.parent = parent;
  }
  // A root call the ratio does not choose is not traced at all.
  if (!has_parent && (root_ratio_ <= 0.0 || (root_ratio_ < 1.0 && Draw() >= root_ratio_))) return nullptr;
  options.start_steady_time = otel::common::SteadyTimestamp(start.received);
  const ClockAnchor anchor;
  options.start_system_time = otel::common::SystemTimestamp(anchor.ToSystem(start.received));
  // The sampler decides on the name and parent alone; the attributes are
  // set only on a span that records, so an unsampled call builds none.
  otel::nostd::shared_ptr<otel::trace::Span> span =
      tracer_->StartSpan(otel::nostd::string_view(start.span_name.data(), start.span_name.size()), options);
  if (span->IsRecording()) {
    auto text = [](absl::string_view v) { return otel::nostd::string_view(v.data(), v.size()); };
    if (start.transport == CallTransport::kGrpc) {
      span->SetAttribute("rpc.system", "grpc");
      span->SetAttribute("rpc.service", text(start.rpc_service));
      span->SetAttribute("rpc.method", text(start.rpc_method));
    } else {
      span->SetAttribute("http.request.method", "POST");
      span->SetAttribute("http.route", text(start.http_route));
      span->SetAttribute("url.path", text(start.url_path));
    }
    span->SetAttribute("infergate.model", text(start.model));
  }
  return std::make_unique<CallTrace>(tracer_, std::move(span), start, anchor);
}

bool Tracing::Flush(std::chrono::milliseconds timeout) {
  return queue_->ForceFlush(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
}

void Tracing::Shutdown(std::chrono::milliseconds timeout) {
  if (!provider_) return;
  if (!queue_->Shutdown(std::chrono::duration_cast<std::chrono::microseconds>(timeout))) {
    LOG_WARNING << "tracing: the collector did not take the last spans within " << timeout.count()
                << " ms; exiting without them";
    // The export thread still uses the queue and exporter that the
    // provider and the tracer own: they stay, unreleased (and reachable,
    // for leak checkers), until the process ends.
    abandoned_tracing = new AbandonedTracing{std::move(provider_), tracer_};
  }
  provider_.reset();
}

uint64_t Tracing::spans_exported() const { return queue_->exported(); }
uint64_t Tracing::spans_dropped() const { return queue_->dropped(); }
uint64_t Tracing::spans_failed_export() const { return queue_->failed(); }

}  // namespace infergate
