#include "service/tracing/tracing_options.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

// Cases name only the flags they set (designated initializers); the rest
// stay at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace infergate {
namespace {

// The environment a case runs in.
Getenv EnvOf(const std::map<std::string, std::string>& env) {
  return [env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

// When tracing is on, and where spans go: one row per rule.
struct EndpointCase {
  const char* what;
  TracingFlags flags;
  std::map<std::string, std::string> env;
  bool enabled;
  const char* endpoint;
  TracingOptions::Protocol protocol;
};

TEST(TracingOptions, TracingIsOnOnlyWhenACollectorIsNamed) {
  using P = TracingOptions::Protocol;
  const EndpointCase cases[] = {
      {"nothing set: off", {}, {}, false, "http://localhost:4317", P::kGrpc},
      {"the flag", {.otlp_endpoint = "http://c:4317"}, {}, true, "http://c:4317", P::kGrpc},
      {"the general variable", {}, {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"}}, true, "http://c:4317", P::kGrpc},
      {"the traces variable wins over the general one",
       {},
       {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4317"}, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:4317"}},
       true,
       "http://b:4317",
       P::kGrpc},
      {"the flag wins over the variables",
       {.otlp_endpoint = "http://f:4317"},
       {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:4317"}},
       true,
       "http://f:4317",
       P::kGrpc},
      {"HTTP adds the traces path to a general endpoint",
       {},
       {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/"}, {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"}},
       true,
       "http://c:4318/v1/traces",
       P::kHttpProtobuf},
      {"HTTP keeps a traces endpoint as it is",
       {},
       {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/custom"},
        {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"}},
       true,
       "http://c:4318/custom",
       P::kHttpProtobuf},
      {"HTTP by flag",
       {.otlp_endpoint = "http://c:4318", .otlp_protocol = "http/protobuf"},
       {},
       true,
       "http://c:4318/v1/traces",
       P::kHttpProtobuf},
      {"OTEL_TRACES_EXPORTER=otlp asks for the default collector",
       {},
       {{"OTEL_TRACES_EXPORTER", "otlp"}},
       true,
       "http://localhost:4317",
       P::kGrpc},
      {"OTEL_TRACES_EXPORTER=none keeps it off",
       {.otlp_endpoint = "http://c:4317"},
       {{"OTEL_TRACES_EXPORTER", "none"}},
       false,
       "http://c:4317",
       P::kGrpc},
      {"OTEL_SDK_DISABLED keeps it off",
       {.otlp_endpoint = "http://c:4317"},
       {{"OTEL_SDK_DISABLED", "true"}},
       false,
       "http://c:4317",
       P::kGrpc},
      {"gRPC takes host:port", {.otlp_endpoint = "collector:4317"}, {}, true, "collector:4317", P::kGrpc},
  };
  for (const EndpointCase& c : cases) {
    absl::StatusOr<TracingOptions> o = ResolveTracingOptions(c.flags, EnvOf(c.env));
    ASSERT_TRUE(o.ok()) << c.what << ": " << o.status();
    EXPECT_EQ(o->enabled, c.enabled) << c.what;
    EXPECT_EQ(o->endpoint, c.endpoint) << c.what;
    EXPECT_EQ(o->protocol, c.protocol) << c.what;
  }
}

TEST(TracingOptions, SamplerAndResource) {
  absl::StatusOr<TracingOptions> o = ResolveTracingOptions(
      {.sampler_arg = "0.5"}, EnvOf({{"OTEL_TRACES_SAMPLER", "parentbased_traceidratio"},
                                     {"OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod,k8s.pod.name=a%2Cb"},
                                     {"OTEL_SERVICE_NAME", "scorer"}}));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->sampler, "parentbased_traceidratio");
  EXPECT_DOUBLE_EQ(o->sampler_ratio, 0.5);  // the flag over the (absent) variable
  EXPECT_EQ(o->service_name, "scorer");
  EXPECT_EQ(o->resource_attributes.at("deployment.environment"), "prod");
  EXPECT_EQ(o->resource_attributes.at("k8s.pod.name"), "a,b");
  EXPECT_EQ(o->resource_attributes.at("service.name"), "scorer");

  // service.name from the resource when nothing else names it; the flag over all.
  o = ResolveTracingOptions({}, EnvOf({{"OTEL_RESOURCE_ATTRIBUTES", "service.name=from-resource"}}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->service_name, "from-resource");
  o = ResolveTracingOptions({.service_name = "flag"}, EnvOf({{"OTEL_SERVICE_NAME", "env"}}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->service_name, "flag");
  // Defaults: OpenTelemetry's.
  o = ResolveTracingOptions({}, EnvOf({}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->sampler, "parentbased_always_on");
  EXPECT_EQ(o->service_name, "infergate");
  EXPECT_EQ(o->max_queue_size, 2048u);
  EXPECT_EQ(o->schedule_delay, std::chrono::milliseconds(5000));
}

TEST(TracingOptions, TheExportQueueFollowsTheBatchProcessorVariablesAndFlags) {
  absl::StatusOr<TracingOptions> o = ResolveTracingOptions({}, EnvOf({{"OTEL_BSP_MAX_QUEUE_SIZE", "100"},
                                                                      {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "500"},
                                                                      {"OTEL_BSP_SCHEDULE_DELAY", "250"},
                                                                      {"OTEL_EXPORTER_OTLP_TIMEOUT", "3000"}}));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->max_queue_size, 100u);
  EXPECT_EQ(o->max_export_batch_size, 100u) << "a batch is at most the queue";
  EXPECT_EQ(o->schedule_delay, std::chrono::milliseconds(250));
  EXPECT_EQ(o->export_timeout, std::chrono::milliseconds(3000));
  o = ResolveTracingOptions({.max_queue_size = 7, .schedule_delay = std::chrono::milliseconds(20)},
                            EnvOf({{"OTEL_BSP_MAX_QUEUE_SIZE", "100"}}));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->max_queue_size, 7u);
  EXPECT_EQ(o->schedule_delay, std::chrono::milliseconds(20));
}

// Each bad value is refused, naming where it came from.
TEST(TracingOptions, BadValuesNameTheirSource) {
  struct BadCase {
    TracingFlags flags;
    std::map<std::string, std::string> env;
    const char* names;
  };
  const BadCase cases[] = {
      {{.otlp_protocol = "thrift"}, {}, "--otlp-protocol"},
      {{}, {{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"}}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
      {{.sampler = "sometimes"}, {}, "--trace-sampler"},
      {{}, {{"OTEL_TRACES_SAMPLER", "jaeger_remote"}}, "OTEL_TRACES_SAMPLER"},
      {{.sampler = "traceidratio", .sampler_arg = "1.5"}, {}, "--trace-sampler-arg"},
      {{}, {{"OTEL_TRACES_SAMPLER", "traceidratio"}, {"OTEL_TRACES_SAMPLER_ARG", "half"}}, "OTEL_TRACES_SAMPLER_ARG"},
      {{}, {{"OTEL_TRACES_EXPORTER", "zipkin"}}, "OTEL_TRACES_EXPORTER"},
      {{}, {{"OTEL_RESOURCE_ATTRIBUTES", "novalue"}}, "OTEL_RESOURCE_ATTRIBUTES"},
      {{.resource_attributes = "=x"}, {}, "--resource-attributes"},
      {{}, {{"OTEL_BSP_MAX_QUEUE_SIZE", "0"}}, "OTEL_BSP_MAX_QUEUE_SIZE"},
      {{}, {{"OTEL_BSP_SCHEDULE_DELAY", "soon"}}, "OTEL_BSP_SCHEDULE_DELAY"},
      {{.max_queue_size = -1}, {}, "--trace-queue-size"},
      {{.otlp_endpoint = "collector"}, {}, "--otlp-endpoint"},
      {{.otlp_endpoint = "collector:4318", .otlp_protocol = "http/protobuf"}, {}, "--otlp-endpoint"},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<TracingOptions> o = ResolveTracingOptions(c.flags, EnvOf(c.env));
    ASSERT_FALSE(o.ok()) << c.names;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << c.names;
    EXPECT_NE(o.status().message().find(c.names), absl::string_view::npos) << o.status();
  }
}

}  // namespace
}  // namespace infergate
