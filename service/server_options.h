#pragma once
// Everything the server can be told on its command line.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include <chrono>

#include "devices/device_registry.h"
#include "scheduler/scheduler.h"

namespace infergate {

struct ServerOptions {
  std::string address = "0.0.0.0:50051";
  std::string model_repository = "./models";
  int64_t max_receive_bytes = 64 << 20;
  int64_t cpu_workers = 0;
  int64_t intra_op_threads = 0;
  int64_t queue_capacity = 1024;
  int64_t max_tensor_rank = 8;
  int64_t max_tensor_elements = int64_t{1} << 28;
  std::string drain_timeout = "30s";
  bool batching = true;
  int64_t worker_spin_us = 200;
  std::string cache_budget;  // "cpu=8GiB,cuda:0=20GiB"
  double cache_budget_fraction = 0.8;
  std::string state_file;
  std::string metrics_address = "0.0.0.0:9464";
  std::string tls_cert;       // PEM certificate chain; TLS when set
  std::string tls_key;        // PEM private key
  std::string tls_client_ca;  // PEM CA; mutual TLS when set
  std::string auth_token_file;
  std::string admin_token_file;
  bool disable_admin = false;
  std::string max_connection_age;
  int64_t max_concurrent_streams = 256;  // per client connection
  std::string device_failure_cooldown = "30s";
  std::string simulate_failing_devices;
  int64_t simulate_failures_after = 0;  // e.g. "5m"; empty = connections live forever
  std::string log_level = "info";
  std::string devices;           // allow-list; empty = all
  std::string simulate_devices;  // e.g. "mps,cuda:0=2GiB@7.5"
  std::string simulate_mps_unsupported_ops;  // empty = the default list
  std::string nvml_library = "libnvidia-ml.so.1";
};

// Parses argv. `*help_text` is set (and options left default) for --help.
absl::StatusOr<ServerOptions> ParseServerOptions(int argc, const char* const* argv, std::string* help_text);

// The device-discovery part of the options, parsed (errors name the flag).
absl::StatusOr<DiscoveryOptions> DiscoveryFromOptions(const ServerOptions& options);
// The scheduler part of the options.
absl::StatusOr<SchedulerOptions> SchedulerFromOptions(const ServerOptions& options);
// "30s", "1500ms", "2m", "45" (seconds).
absl::StatusOr<std::chrono::milliseconds> ParseDuration(absl::string_view text, absl::string_view flag);

}  // namespace infergate
