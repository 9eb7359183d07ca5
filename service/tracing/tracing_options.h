#pragma once
// How request tracing is configured: OpenTelemetry's standard environment
// variables, with the server's flags laid over them (a flag that is set
// wins). Tracing is off unless an OTLP endpoint is named (flag or
// OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT) or OTEL_TRACES_EXPORTER=otlp asks
// for the default one; OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none
// keep it off whatever else is set.
//
// A pure function of its inputs (the environment is passed in), so every
// rule is tested without touching the process's environment.

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace infergate {

// The tracing flags as given; empty means not set (the environment, then
// the default, applies).
struct TracingFlags {
  std::string otlp_endpoint;                    // --otlp-endpoint
  std::string otlp_protocol;                    // --otlp-protocol
  std::string sampler;                          // --trace-sampler
  std::string sampler_arg;                      // --trace-sampler-arg
  std::string service_name;                     // --service-name
  std::string resource_attributes;              // --resource-attributes
  int64_t max_queue_size = 0;                   // --trace-queue-size; 0: not set
  std::chrono::milliseconds schedule_delay{0};  // --trace-export-delay; 0: not set
};

struct TracingOptions {
  bool enabled = false;
  enum class Protocol { kGrpc, kHttpProtobuf };
  Protocol protocol = Protocol::kGrpc;
  // Where spans go: "http://host:4317" for gRPC; the full URL of the
  // traces path ("http://host:4318/v1/traces") for HTTP.
  std::string endpoint;
  // OpenTelemetry's sampler names: always_on, always_off, traceidratio,
  // parentbased_always_on, parentbased_always_off, parentbased_traceidratio.
  std::string sampler = "parentbased_always_on";
  double sampler_ratio = 1.0;  // for the traceidratio samplers
  std::string service_name = "infergate";
  std::map<std::string, std::string> resource_attributes;
  // The export queue (OTEL_BSP_*): spans held at most, per export, and how
  // long a partial batch waits.
  size_t max_queue_size = 2048;
  size_t max_export_batch_size = 512;
  std::chrono::milliseconds schedule_delay{5000};
  std::chrono::milliseconds export_timeout{10000};  // OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT
};

using Getenv = std::function<const char*(const char* name)>;

// INVALID_ARGUMENT naming the flag or variable at fault.
absl::StatusOr<TracingOptions> ResolveTracingOptions(const TracingFlags& flags, const Getenv& getenv);

// "infergate.node=a,k8s.pod.name=b" (OTEL_RESOURCE_ATTRIBUTES: values
// percent-encoded) into a map; `what` names the source in errors.
absl::StatusOr<std::map<std::string, std::string>> ParseResourceAttributes(const std::string& text,
                                                                           const std::string& what);

}  // namespace infergate
