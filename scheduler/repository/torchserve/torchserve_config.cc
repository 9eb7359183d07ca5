#include "scheduler/repository/torchserve/torchserve_config.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "scheduler/repository/torchserve/java_properties.h"

namespace infergate {
namespace {

struct KeyRow {
  absl::string_view key;
  PropertyRow row;
};

constexpr absl::string_view kThreads = "infergate sizes its own threads (--workers, --http-threads)";
constexpr absl::string_view kPython = "infergate runs no Python: built-in handlers are served in C++";
constexpr absl::string_view kMetrics = "infergate always serves Prometheus metrics on --metrics-address";
constexpr absl::string_view kTls = "set --tls-cert and --tls-key (and --tls-client-ca) instead";
constexpr absl::string_view kSequences = "infergate has no sequence batching for stateful models";

// Every key TorchServe's ConfigManager reads (and NUM_WORKERS, which
// KServe's sample config sets for its image), and what infergate does.
constexpr KeyRow kKeys[] = {
    {"model_snapshot", {PropertyUse::kRead, ""}},
    {"models", {PropertyUse::kRead, ""}},
    {"load_models", {PropertyUse::kRead, ""}},
    {"model_store", {PropertyUse::kRead, ""}},
    {"default_response_timeout", {PropertyUse::kRead, ""}},
    {"job_queue_size", {PropertyUse::kRead, ""}},
    {"inference_address", {PropertyUse::kAddress, ""}},
    {"management_address", {PropertyUse::kAddress, ""}},
    {"metrics_address", {PropertyUse::kAddress, ""}},
    {"grpc_inference_port", {PropertyUse::kAddress, ""}},
    {"grpc_management_port", {PropertyUse::kAddress, ""}},
    {"grpc_inference_address", {PropertyUse::kAddress, ""}},
    {"grpc_management_address", {PropertyUse::kAddress, ""}},
    {"NUM_WORKERS", {PropertyUse::kNoEffect, kThreads}},
    {"number_of_netty_threads", {PropertyUse::kNoEffect, kThreads}},
    {"netty_client_threads", {PropertyUse::kNoEffect, kThreads}},
    {"default_workers_per_model", {PropertyUse::kNoEffect, kThreads}},
    {"initial_worker_port", {PropertyUse::kNoEffect, kPython}},
    {"initial_distribution_port", {PropertyUse::kNoEffect, kPython}},
    {"install_py_dep_per_model", {PropertyUse::kNoEffect, kPython}},
    {"python", {PropertyUse::kNoEffect, kPython}},
    {"cpu_launcher_enable", {PropertyUse::kNoEffect, kPython}},
    {"cpu_launcher_args", {PropertyUse::kNoEffect, kPython}},
    {"ipex_enable", {PropertyUse::kNoEffect, kPython}},
    {"ipex_gpu_enable", {PropertyUse::kNoEffect, kPython}},
    {"blacklist_env_vars", {PropertyUse::kNoEffect, kPython}},
    {"default_startup_timeout", {PropertyUse::kNoEffect, kPython}},
    {"unregister_model_timeout", {PropertyUse::kNoEffect, "an unload here drops resident copies at once"}},
    {"number_of_gpu",
     {PropertyUse::kNoEffect, "infergate places models on the devices it finds; restrict them with --devices"}},
    {"enable_envvars_config", {PropertyUse::kNoEffect, "settings come from infergate's flags"}},
    {"model_server_home", {PropertyUse::kNoEffect, "paths here are relative to the model repository"}},
    {"prefer_direct_buffer", {PropertyUse::kNoEffect, kThreads}},
    {"use_native_io", {PropertyUse::kNoEffect, kThreads}},
    {"io_ratio", {PropertyUse::kNoEffect, kThreads}},
    {"async_logging", {PropertyUse::kNoEffect, "infergate's log is set with --log-level"}},
    {"debug", {PropertyUse::kNoEffect, "infergate's log is set with --log-level"}},
    {"cpp_log_config", {PropertyUse::kNoEffect, "infergate's log is set with --log-level"}},
    {"enable_metrics_api", {PropertyUse::kNoEffect, kMetrics}},
    {"metrics_mode", {PropertyUse::kNoEffect, kMetrics}},
    {"metrics_format", {PropertyUse::kNoEffect, kMetrics}},
    {"metrics_config", {PropertyUse::kNoEffect, kMetrics}},
    {"model_metrics_auto_detect", {PropertyUse::kNoEffect, kMetrics}},
    {"metric_time_interval", {PropertyUse::kNoEffect, kMetrics}},
    {"disable_system_metrics", {PropertyUse::kNoEffect, kMetrics}},
    {"system_metrics_cmd", {PropertyUse::kNoEffect, kMetrics}},
    {"enable_model_api", {PropertyUse::kNoEffect, "model loads and unloads need infergate's admin token"}},
    {"disable_token_authorization",
     {PropertyUse::kNoEffect, "infergate's tokens are --auth-token-file and --admin-token-file"}},
    {"token_expiration_min",
     {PropertyUse::kNoEffect, "infergate's tokens are --auth-token-file and --admin-token-file"}},
    {"allowed_urls", {PropertyUse::kNoEffect, "infergate registers no model from a URL"}},
    {"use_env_allowed_urls", {PropertyUse::kNoEffect, "infergate registers no model from a URL"}},
    {"decode_input_request", {PropertyUse::kNoEffect, "the built-in handlers decode the body themselves"}},
    {"service_envelope", {PropertyUse::kNoEffect, "KServe's v1 and v2 protocols are served natively"}},
    {"ts_open_inference_protocol", {PropertyUse::kNoEffect, "the Open Inference Protocol is always served"}},
    {"limit_max_image_pixels", {PropertyUse::kNoEffect, "the image handler has its own pixel limit"}},
    {"grpc_inference_max_connection_age_ms", {PropertyUse::kNoEffect, "set --max-connection-age instead"}},
    {"grpc_inference_max_connection_age_grace_ms", {PropertyUse::kNoEffect, "set --max-connection-age instead"}},
    {"grpc_management_max_connection_age_ms", {PropertyUse::kNoEffect, "set --max-connection-age instead"}},
    {"grpc_management_max_connection_age_grace_ms", {PropertyUse::kNoEffect, "set --max-connection-age instead"}},
    {"version", {PropertyUse::kNoEffect, "the TorchServe version that wrote a snapshot"}},
    {"keystore", {PropertyUse::kRefused, kTls}},
    {"keystore_pass", {PropertyUse::kRefused, kTls}},
    {"keystore_type", {PropertyUse::kRefused, kTls}},
    {"certificate_file", {PropertyUse::kRefused, kTls}},
    {"private_key_file", {PropertyUse::kRefused, kTls}},
    {"enable_grpc_ssl", {PropertyUse::kRefused, kTls}},
    {"cors_allowed_origin",
     {PropertyUse::kRefused, "infergate refuses cross-origin browser calls; serve pages from a proxy"}},
    {"cors_allowed_methods",
     {PropertyUse::kRefused, "infergate refuses cross-origin browser calls; serve pages from a proxy"}},
    {"cors_allowed_headers",
     {PropertyUse::kRefused, "infergate refuses cross-origin browser calls; serve pages from a proxy"}},
    {"max_request_size", {PropertyUse::kRefused, "set --max-receive-bytes instead"}},
    {"max_response_size", {PropertyUse::kRefused, "infergate bounds answers by their tensors (--max-receive-bytes)"}},
    {"default_service_handler",
     {PropertyUse::kRefused, "infergate runs no Python handler; see the README's TorchServe section"}},
    {"workflow_store", {PropertyUse::kRefused, "infergate serves no TorchServe workflows"}},
    {"ts_header_key_sequence_id", {PropertyUse::kRefused, kSequences}},
    {"ts_header_key_sequence_start", {PropertyUse::kRefused, kSequences}},
    {"ts_header_key_sequence_end", {PropertyUse::kRefused, kSequences}},
    {"ts_request_sequence_id", {PropertyUse::kRefused, kSequences}},
    {"ts_request_sequence_start", {PropertyUse::kRefused, kSequences}},
    {"ts_request_sequence_end", {PropertyUse::kRefused, kSequences}},
};

absl::Status Bad(absl::string_view where, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("config.properties: ", where, ": ", why));
}

// A non-negative whole number of at most `max` in `value` (a JSON number
// or a string of digits, as snapshots written by hand have both).
absl::StatusOr<uint64_t> Count(const nlohmann::json& value, absl::string_view where, uint64_t max) {
  uint64_t n = 0;
  if (value.is_number_unsigned()) {
    n = value.get<uint64_t>();
  } else if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    n = static_cast<uint64_t>(value.get<int64_t>());
  } else if (!value.is_string() || !absl::SimpleAtoi(value.get<std::string>(), &n)) {
    return Bad(where, "must be a whole number");
  }
  if (n > max) return Bad(where, absl::StrCat("must be at most ", max));
  return n;
}

absl::StatusOr<TorchServeVersionSettings> ParseVersion(const nlohmann::json& entry, const std::string& where) {
  if (!entry.is_object()) return Bad(where, "must be an object");
  TorchServeVersionSettings s;
  for (const auto& [field, value] : entry.items()) {
    const std::string at = absl::StrCat(where, ".", field);
    if (field == "marName") {
      if (!value.is_string() || value.get<std::string>().empty()) return Bad(at, "must be an archive's file name");
      s.mar_name = value.get<std::string>();
    } else if (field == "defaultVersion") {
      if (!value.is_boolean()) return Bad(at, "must be true or false");
      s.default_version = value.get<bool>();
    } else if (field == "batchSize") {
      ASSIGN_OR_RETURN(uint64_t n, Count(value, at, 1 << 16));
      if (n == 0) return Bad(at, "must be at least 1");
      s.batch_size = static_cast<uint32_t>(n);
    } else if (field == "maxBatchDelay") {
      ASSIGN_OR_RETURN(uint64_t n, Count(value, at, 3600 * 1000));
      s.max_batch_delay_ms = n;
    } else if (field == "responseTimeout") {
      ASSIGN_OR_RETURN(uint64_t n, Count(value, at, 86400 * 30));
      s.response_timeout_s = n;
    } else if (field == "minWorkers" || field == "maxWorkers") {
      ASSIGN_OR_RETURN(uint64_t n, Count(value, at, 4096));
      (field == "minWorkers" ? s.min_workers : s.max_workers) = static_cast<uint32_t>(n);
    } else if (field == "startupTimeout" || field == "runtimeType" || field == "deviceType" ||
               field == "parallelLevel" || field == "parallelType" || field == "deviceIds" || field == "jobQueueSize" ||
               field == "useJobTicket" || field == "maxRetryTimeoutInSec" || field == "clientTimeoutInMills") {
      continue;  // worker placement and restart settings, no effect here
    } else {
      return Bad(at, "is not a TorchServe model setting");
    }
  }
  if (s.mar_name.empty()) return Bad(where, "has no marName");
  return s;
}

absl::Status ParseSnapshot(const std::string& key, const std::string& text, TorchServeConfig& config) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Bad(key, "is not a JSON object");
  // model_snapshot wraps the models in {"name", "modelCount", "models"};
  // `models` is the map itself.
  const nlohmann::json* models = &doc;
  if (key == "model_snapshot") {
    auto it = doc.find("models");
    if (it == doc.end() || !it->is_object()) return Bad(key, "has no \"models\" object");
    models = &*it;
  }
  for (const auto& [name, versions] : models->items()) {
    if (!versions.is_object() || versions.empty())
      return Bad(absl::StrCat(key, ": ", name), "must map versions to settings");
    int defaults = 0;
    for (const auto& [version, entry] : versions.items()) {
      absl::StatusOr<TorchServeVersionSettings> s = ParseVersion(entry, absl::StrCat(key, ": ", name, ".", version));
      if (!s.ok()) return s.status();
      defaults += s->default_version ? 1 : 0;
      config.snapshot[name][version] = *std::move(s);
    }
    if (defaults > 1) return Bad(absl::StrCat(key, ": ", name), "has more than one defaultVersion");
  }
  return absl::OkStatus();
}

}  // namespace

PropertyRow PropertyUseOf(absl::string_view key) {
  for (const KeyRow& k : kKeys) {
    if (k.key == key) return k.row;
  }
  return {PropertyUse::kRefused, ""};
}

absl::StatusOr<TorchServeConfig> ParseTorchServeConfig(absl::string_view text) {
  absl::StatusOr<std::map<std::string, std::string>> properties = ParseJavaProperties(text);
  if (!properties.ok()) return Bad("", properties.status().message());
  TorchServeConfig config;
  for (const auto& [key, value] : *properties) {
    const PropertyRow row = PropertyUseOf(key);
    switch (row.use) {
      case PropertyUse::kRefused:
        if (row.why.empty()) return Bad(key, "is not a TorchServe setting infergate knows; remove it");
        return Bad(key, absl::StrCat("is not supported: ", row.why));
      case PropertyUse::kNoEffect: config.notes.push_back(absl::StrCat(key, " ignored: ", row.why)); continue;
      case PropertyUse::kAddress:
      case PropertyUse::kRead: break;
    }
    if (key == "model_snapshot" || key == "models") {
      RETURN_IF_ERROR(ParseSnapshot(key, value, config));
    } else if (key == "load_models") {
      config.load_models = std::string(absl::StripAsciiWhitespace(value));
    } else if (key == "model_store") {
      config.model_store = value;
    } else if (key == "default_response_timeout" || key == "job_queue_size") {
      uint64_t n = 0;
      if (!absl::SimpleAtoi(value, &n) || n > (key == "job_queue_size" ? 1u << 20 : 86400u * 30)) {
        return Bad(key, absl::StrCat("'", value.substr(0, 32), "' is not a whole number in range"));
      }
      if (key == "job_queue_size") {
        config.job_queue_size = static_cast<uint32_t>(n);
      } else {
        config.default_response_timeout_s = n;
      }
    } else if (key == "inference_address") {
      config.addresses.inference = value;
    } else if (key == "management_address") {
      config.addresses.management = value;
    } else if (key == "metrics_address") {
      config.addresses.metrics = value;
    } else if (key == "grpc_inference_port") {
      if (!absl::SimpleAtoi(value, &config.addresses.grpc_inference_port) || config.addresses.grpc_inference_port < 0 ||
          config.addresses.grpc_inference_port > 65535) {
        return Bad(key, "is not a port number");
      }
    }
  }
  return config;
}

bool TorchServeVersionLess(absl::string_view a, absl::string_view b) {
  std::vector<absl::string_view> pa = absl::StrSplit(a, '.'), pb = absl::StrSplit(b, '.');
  for (size_t i = 0; i < std::min(pa.size(), pb.size()); ++i) {
    uint64_t na = 0, nb = 0;
    if (absl::SimpleAtoi(pa[i], &na) && absl::SimpleAtoi(pb[i], &nb)) {
      if (na != nb) return na < nb;
    } else if (pa[i] != pb[i]) {
      return pa[i] < pb[i];
    }
  }
  return pa.size() < pb.size() || (pa.size() == pb.size() && a < b);
}

}  // namespace infergate
