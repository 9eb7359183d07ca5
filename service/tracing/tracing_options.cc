#include "service/tracing/tracing_options.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace infergate {

namespace {

std::string Env(const Getenv& getenv, const char* name) {
  const char* value = getenv(name);
  return value ? std::string(absl::StripAsciiWhitespace(value)) : std::string();
}

// The flag when set, else the variable; `from` says which, for errors.
std::string Pick(const std::string& flag, const char* flag_name, const Getenv& getenv, const char* variable,
                 std::string* from) {
  if (!flag.empty()) {
    *from = flag_name;
    return flag;
  }
  *from = variable;
  return Env(getenv, variable);
}

// The OTLP/HTTP traces URL under a general endpoint ("http://c:4318/").
std::string TracesUrl(absl::string_view endpoint) {
  return absl::StrCat(absl::StripSuffix(endpoint, "/"), "/v1/traces");
}

absl::Status Bad(const std::string& from, const std::string& value, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat(from, ": '", value.substr(0, 64), "'; expected ", expected));
}

bool IsSampler(const std::string& name) {
  for (const char* known : {"always_on", "always_off", "traceidratio", "parentbased_always_on",
                            "parentbased_always_off", "parentbased_traceidratio"}) {
    if (name == known) return true;
  }
  return false;
}

// OTEL_* durations are integer milliseconds.
absl::Status Millis(const Getenv& getenv, const char* variable, std::chrono::milliseconds* out) {
  std::string text = Env(getenv, variable);
  if (text.empty()) return absl::OkStatus();
  int64_t ms = 0;
  if (!absl::SimpleAtoi(text, &ms) || ms <= 0) return Bad(variable, text, "a positive count of milliseconds");
  *out = std::chrono::milliseconds(ms);
  return absl::OkStatus();
}

absl::Status Count(const Getenv& getenv, const char* variable, size_t* out) {
  std::string text = Env(getenv, variable);
  if (text.empty()) return absl::OkStatus();
  uint64_t n = 0;
  if (!absl::SimpleAtoi(text, &n) || n < 1 || n > 1000000) return Bad(variable, text, "a count of 1..1000000");
  *out = n;
  return absl::OkStatus();
}

std::string PercentDecode(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    int hi = 0, lo = 0;
    auto hex = [](char c, int* v) {
      if (c >= '0' && c <= '9')
        *v = c - '0';
      else if (c >= 'a' && c <= 'f')
        *v = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        *v = c - 'A' + 10;
      else
        return false;
      return true;
    };
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1], &hi) && hex(text[i + 2], &lo)) {
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> ParseResourceAttributes(const std::string& text,
                                                                           const std::string& what) {
  std::map<std::string, std::string> attributes;
  for (absl::string_view pair : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    pair = absl::StripAsciiWhitespace(pair);
    size_t eq = pair.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return Bad(what, std::string(pair), "key=value pairs separated by commas");
    }
    attributes[std::string(absl::StripAsciiWhitespace(pair.substr(0, eq)))] =
        PercentDecode(absl::StripAsciiWhitespace(pair.substr(eq + 1)));
  }
  return attributes;
}

namespace {

// The endpoint into `o->endpoint`: a traces endpoint is used as it is; a
// general one gets the traces path under HTTP (the OTLP exporter
// specification). True when one was named (a flag or the environment),
// false for the default.
absl::StatusOr<bool> ResolveEndpoint(const TracingFlags& flags, const Getenv& getenv, bool http, TracingOptions* o) {
  std::string from;
  bool named = false;
  if (!flags.otlp_endpoint.empty()) {
    o->endpoint = flags.otlp_endpoint;
    from = "--otlp-endpoint";
    named = true;
    if (http && !absl::EndsWith(o->endpoint, "/v1/traces")) o->endpoint = TracesUrl(o->endpoint);
  } else if (std::string traces = Env(getenv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); !traces.empty()) {
    o->endpoint = traces;
    from = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
    named = true;
  } else if (std::string general = Env(getenv, "OTEL_EXPORTER_OTLP_ENDPOINT"); !general.empty()) {
    o->endpoint = http ? TracesUrl(general) : general;
    from = "OTEL_EXPORTER_OTLP_ENDPOINT";
    named = true;
  } else {
    o->endpoint = http ? "http://localhost:4318/v1/traces" : "http://localhost:4317";
  }
  if (named && !absl::StartsWith(o->endpoint, "http://") && !absl::StartsWith(o->endpoint, "https://")) {
    if (http) return Bad(from, o->endpoint, "an http:// or https:// URL");
    // gRPC also takes host:port.
    if (o->endpoint.find(':') == std::string::npos) return Bad(from, o->endpoint, "a URL or host:port");
  }
  return named;
}

// The spans' resource: OTEL_RESOURCE_ATTRIBUTES, then the flag's, and the
// service's name (the flag, OTEL_SERVICE_NAME, or service.name among them).
absl::Status ResolveResource(const TracingFlags& flags, const Getenv& getenv, TracingOptions* o) {
  std::string from;
  std::string resource = Env(getenv, "OTEL_RESOURCE_ATTRIBUTES");
  absl::StatusOr<std::map<std::string, std::string>> attributes =
      ParseResourceAttributes(resource, "OTEL_RESOURCE_ATTRIBUTES");
  if (!attributes.ok()) return attributes.status();
  o->resource_attributes = *std::move(attributes);
  if (!flags.resource_attributes.empty()) {
    absl::StatusOr<std::map<std::string, std::string>> more =
        ParseResourceAttributes(flags.resource_attributes, "--resource-attributes");
    if (!more.ok()) return more.status();
    for (auto& [key, value] : *more) o->resource_attributes[key] = value;
  }
  if (auto it = o->resource_attributes.find("service.name"); it != o->resource_attributes.end()) {
    o->service_name = it->second;
  }
  std::string service = Pick(flags.service_name, "--service-name", getenv, "OTEL_SERVICE_NAME", &from);
  if (!service.empty()) o->service_name = service;
  o->resource_attributes["service.name"] = o->service_name;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TracingOptions> ResolveTracingOptions(const TracingFlags& flags, const Getenv& getenv) {
  TracingOptions o;
  std::string from;

  // Which protocol, since it decides the default endpoint and its path.
  std::string protocol =
      Pick(flags.otlp_protocol, "--otlp-protocol", getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", &from);
  if (protocol.empty()) {
    from = "OTEL_EXPORTER_OTLP_PROTOCOL";
    protocol = Env(getenv, "OTEL_EXPORTER_OTLP_PROTOCOL");
  }
  if (protocol.empty() || protocol == "grpc") {
    o.protocol = TracingOptions::Protocol::kGrpc;
  } else if (protocol == "http/protobuf") {
    o.protocol = TracingOptions::Protocol::kHttpProtobuf;
  } else {
    return Bad(from, protocol, "grpc or http/protobuf");
  }
  const bool http = o.protocol == TracingOptions::Protocol::kHttpProtobuf;

  ASSIGN_OR_RETURN(const bool named, ResolveEndpoint(flags, getenv, http, &o));

  std::string exporter = absl::AsciiStrToLower(Env(getenv, "OTEL_TRACES_EXPORTER"));
  if (!exporter.empty() && exporter != "otlp" && exporter != "none") {
    return Bad("OTEL_TRACES_EXPORTER", exporter, "otlp or none (infergate exports OTLP only)");
  }
  const bool disabled = absl::AsciiStrToLower(Env(getenv, "OTEL_SDK_DISABLED")) == "true";
  o.enabled = !disabled && exporter != "none" && (named || exporter == "otlp");

  std::string sampler = Pick(flags.sampler, "--trace-sampler", getenv, "OTEL_TRACES_SAMPLER", &from);
  if (!sampler.empty()) {
    if (!IsSampler(sampler)) {
      return Bad(from, sampler,
                 "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or "
                 "parentbased_traceidratio");
    }
    o.sampler = sampler;
  }
  std::string arg = Pick(flags.sampler_arg, "--trace-sampler-arg", getenv, "OTEL_TRACES_SAMPLER_ARG", &from);
  if (!arg.empty() && absl::EndsWith(o.sampler, "traceidratio")) {
    double ratio = 0;
    if (!absl::SimpleAtod(arg, &ratio) || !(ratio >= 0.0 && ratio <= 1.0)) {
      return Bad(from, arg, "a sampling ratio from 0 to 1");
    }
    o.sampler_ratio = ratio;
  }

  RETURN_IF_ERROR(ResolveResource(flags, getenv, &o));

  RETURN_IF_ERROR(Count(getenv, "OTEL_BSP_MAX_QUEUE_SIZE", &o.max_queue_size));
  if (flags.max_queue_size != 0) {
    if (flags.max_queue_size < 1 || flags.max_queue_size > 1000000) {
      return absl::InvalidArgumentError("--trace-queue-size: must be 1..1000000");
    }
    o.max_queue_size = static_cast<size_t>(flags.max_queue_size);
  }
  RETURN_IF_ERROR(Count(getenv, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", &o.max_export_batch_size));
  if (o.max_export_batch_size > o.max_queue_size) o.max_export_batch_size = o.max_queue_size;
  RETURN_IF_ERROR(Millis(getenv, "OTEL_BSP_SCHEDULE_DELAY", &o.schedule_delay));
  if (flags.schedule_delay.count() < 0) return absl::InvalidArgumentError("--trace-export-delay: must be positive");
  if (flags.schedule_delay.count() > 0) o.schedule_delay = flags.schedule_delay;
  RETURN_IF_ERROR(Millis(getenv, "OTEL_EXPORTER_OTLP_TIMEOUT", &o.export_timeout));
  RETURN_IF_ERROR(Millis(getenv, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", &o.export_timeout));
  return o;
}

}  // namespace infergate
