#include "service/server_options.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "service/flags.h"

namespace infergate {

absl::StatusOr<ServerOptions> ParseServerOptions(int argc, const char* const* argv, std::string* help_text) {
  ServerOptions o;
  FlagSet flags(
      "infergate: gRPC inference server for TorchScript models.\n"
      "Usage: infergate [--address HOST:PORT] [--model-repository DIR] [flags]");
  flags.String("address", &o.address, "HOST:PORT to serve gRPC on; port 0 picks a free one.");
  flags.String("model-repository", &o.model_repository,
               "Folder of <model>/config.pbtxt and <model>/<version>/model.pt.");
  flags.Int("max-receive-bytes", &o.max_receive_bytes,
            "Largest request message accepted; larger ones get RESOURCE_EXHAUSTED.");
  flags.Int("cpu-workers", &o.cpu_workers, "Threads running models on the CPU; 0 picks min(cores, 4).");
  flags.Int("intra-op-threads", &o.intra_op_threads, "LibTorch intra-op threads; 0 picks cores / cpu-workers.");
  flags.Int("queue-capacity", &o.queue_capacity,
            "Requests that may wait per device; more get RESOURCE_EXHAUSTED.");
  flags.Int("max-tensor-rank", &o.max_tensor_rank, "Largest rank accepted for an input tensor.");
  flags.Int("max-tensor-elements", &o.max_tensor_elements, "Largest element count accepted for an input tensor.");
  flags.String("drain-timeout", &o.drain_timeout,
               "On SIGTERM/SIGINT, how long queued and running requests may take to finish (e.g. 30s, 500ms).");
  flags.Bool("batching", &o.batching, "Dynamic batching for models whose config sets max_batch_size > 1.");
  flags.Int("worker-spin-us", &o.worker_spin_us,
            "Microseconds an idle worker polls its queue before sleeping; trades CPU for latency.");
  flags.String("cache-budget", &o.cache_budget,
               "Model cache budget per device, e.g. \"cpu=8GiB,cuda:0=20GiB\"; least-recently-used idle, unpinned "
               "models are evicted to stay under it.");
  flags.String("metrics-address", &o.metrics_address,
               "HOST:PORT for Prometheus to scrape /metrics from; port 0 picks one; empty disables metrics.");
  flags.String("tls-cert", &o.tls_cert, "PEM certificate chain for the gRPC port; enables TLS (with --tls-key).");
  flags.String("tls-key", &o.tls_key, "PEM private key for --tls-cert.");
  flags.String("tls-client-ca", &o.tls_client_ca,
               "PEM CA bundle; clients must present a certificate it signed (mutual TLS).");
  flags.String("auth-token-file", &o.auth_token_file,
               "File of bearer tokens (one per line) required for Infer, ListDevices and ListModels.");
  flags.String("admin-token-file", &o.admin_token_file,
               "File of bearer tokens required for LoadModel and UnloadModel (admin tokens may also infer).");
  flags.Bool("disable-admin", &o.disable_admin, "Refuse LoadModel and UnloadModel entirely.");
  flags.Int("max-concurrent-streams", &o.max_concurrent_streams,
            "Calls one client connection may have open at once; more wait in the client (HTTP/2 flow control).");
  flags.String("max-connection-age", &o.max_connection_age,
               "Close client connections after this long (e.g. 5m) so clients reconnect and new replicas get "
               "traffic; empty keeps them open.");
  flags.String("state-file", &o.state_file,
               "File keeping what the server learned a device cannot run (MPS ops), so a restart remembers it.");
  flags.String("log-level", &o.log_level, "debug, info, warning or error.");
  flags.String("devices", &o.devices,
               "Allow-list of devices to use, e.g. \"cpu\" (force CPU) or \"cuda:0,mps\"; empty uses all. "
               "The CPU is always kept for fallbacks.");
  flags.String("simulate-devices", &o.simulate_devices,
               "Simulated devices for tests and demos: mps and cuda:N entries, each optionally =MEMORY "
               "(e.g. 2GiB) and @CAPABILITY (cuda, e.g. 7.5) or @MACOS (mps, e.g. 13). They compute on the CPU "
               "but enforce the real backend's rules.");
  flags.String("simulate-mps-unsupported-ops", &o.simulate_mps_unsupported_ops,
               "Comma-separated aten ops simulated MPS raises NotImplementedError for; empty uses a default list "
               "of ops real MPS has lacked (aten::upsample_bicubic2d, aten::grid_sampler_3d, ...).");
  flags.String("simulate-failing-devices", &o.simulate_failing_devices,
               "Fault injection: simulated devices (e.g. cuda:0) that fail every run after "
               "--simulate-failures-after runs, like a lost GPU.");
  flags.Int("simulate-failures-after", &o.simulate_failures_after, "Runs a failing simulated device completes first.");
  flags.String("device-failure-cooldown", &o.device_failure_cooldown,
               "How long a device that failed stays out of service (its work goes to the CPU).");
  flags.String("nvml-library", &o.nvml_library, "NVIDIA management library to read GPU names and memory from.");
  if (absl::Status s = flags.ParseEnvironment("INFERGATE_"); !s.ok()) return s;
  bool help = false;
  absl::StatusOr<std::vector<std::string>> rest = flags.Parse(argc, argv, &help);
  if (!rest.ok()) return rest.status();
  if (help) {
    *help_text = flags.Help();
    return ServerOptions{};
  }
  if (!rest->empty()) return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", rest->front(), "'"));
  if (o.max_receive_bytes < 1024 || o.max_receive_bytes > (int64_t{2} << 30) - 1) {
    return absl::InvalidArgumentError("--max-receive-bytes: must be between 1024 and 2147483647");
  }
  if (o.queue_capacity < 1) return absl::InvalidArgumentError("--queue-capacity: must be at least 1");
  if (o.max_concurrent_streams < 1 || o.max_concurrent_streams > 100000) {
    return absl::InvalidArgumentError("--max-concurrent-streams: must be 1..100000");
  }
  if (o.cpu_workers < 0 || o.cpu_workers > 256) return absl::InvalidArgumentError("--cpu-workers: must be 0..256");
  if (o.intra_op_threads < 0 || o.intra_op_threads > 1024) {
    return absl::InvalidArgumentError("--intra-op-threads: must be 0..1024");
  }
  if (o.max_tensor_rank < 1 || o.max_tensor_rank > 64) {
    return absl::InvalidArgumentError("--max-tensor-rank: must be 1..64");
  }
  if (o.max_tensor_elements < 1) return absl::InvalidArgumentError("--max-tensor-elements: must be positive");
  if (o.log_level != "debug" && o.log_level != "info" && o.log_level != "warning" && o.log_level != "error") {
    return absl::InvalidArgumentError("--log-level: must be debug, info, warning or error");
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key must be given together");
  }
  if (!o.tls_client_ca.empty() && o.tls_cert.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  if (absl::StatusOr<DiscoveryOptions> d = DiscoveryFromOptions(o); !d.ok()) return d.status();
  if (absl::StatusOr<SchedulerOptions> s = SchedulerFromOptions(o); !s.ok()) return s.status();
  if (absl::StatusOr<std::chrono::milliseconds> d = ParseDuration(o.drain_timeout, "--drain-timeout"); !d.ok()) {
    return d.status();
  }
  if (!o.max_connection_age.empty()) {
    if (absl::StatusOr<std::chrono::milliseconds> d = ParseDuration(o.max_connection_age, "--max-connection-age");
        !d.ok()) {
      return d.status();
    }
  }
  return o;
}

absl::StatusOr<std::chrono::milliseconds> ParseDuration(absl::string_view text, absl::string_view flag) {
  absl::string_view number = absl::StripAsciiWhitespace(text);
  double scale = 1000;
  if (absl::ConsumeSuffix(&number, "ms")) {
    scale = 1;
  } else if (absl::ConsumeSuffix(&number, "s")) {
    scale = 1000;
  } else if (absl::ConsumeSuffix(&number, "m")) {
    scale = 60000;
  }
  double value = 0;
  if (!absl::SimpleAtod(number, &value) || value < 0 || value > 86400000) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", text, "' is not a duration such as 30s or 500ms"));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(value * scale));
}

absl::StatusOr<SchedulerOptions> SchedulerFromOptions(const ServerOptions& o) {
  SchedulerOptions s;
  s.cpu_workers = static_cast<int>(o.cpu_workers);
  s.intra_op_threads = static_cast<int>(o.intra_op_threads);
  s.queue_capacity = static_cast<size_t>(o.queue_capacity);
  s.batching = o.batching;
  s.worker_spin_us = static_cast<int>(std::clamp<int64_t>(o.worker_spin_us, 0, 10000));
  s.state_file = o.state_file;
  s.cache_budget_fraction = o.cache_budget_fraction;
  absl::StatusOr<std::chrono::milliseconds> cooldown = ParseDuration(o.device_failure_cooldown, "--device-failure-cooldown");
  if (!cooldown.ok()) return cooldown.status();
  s.device_failure_cooldown = *cooldown;
  for (absl::string_view entry : absl::StrSplit(o.cache_budget, ',', absl::SkipWhitespace())) {
    size_t eq = entry.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--cache-budget: '", entry, "' is not DEVICE=SIZE"));
    }
    absl::StatusOr<DeviceRequest> dev = ParseDeviceRequest(entry.substr(0, eq), "--cache-budget");
    if (!dev.ok()) return dev.status();
    if (dev->automatic || dev->any_index) {
      return absl::InvalidArgumentError(absl::StrCat("--cache-budget: '", entry, "' must name one device"));
    }
    absl::StatusOr<uint64_t> bytes = ParseByteSize(entry.substr(eq + 1));
    if (!bytes.ok()) return absl::InvalidArgumentError(absl::StrCat("--cache-budget: ", bytes.status().message()));
    s.cache_budgets[DeviceId{dev->kind, dev->kind == DeviceKind::kCuda ? dev->index : 0}] = *bytes;
  }
  return s;
}

absl::StatusOr<DiscoveryOptions> DiscoveryFromOptions(const ServerOptions& o) {
  DiscoveryOptions d;
  absl::StatusOr<std::vector<DeviceRequest>> allow = ParseDeviceAllowList(o.devices);
  if (!allow.ok()) return allow.status();
  d.allow = *std::move(allow);
  absl::StatusOr<std::vector<SimulatedDeviceSpec>> sim = ParseSimulatedDevices(o.simulate_devices);
  if (!sim.ok()) return sim.status();
  d.simulated = *std::move(sim);
  if (!o.simulate_mps_unsupported_ops.empty()) {
    d.mps_unsupported_ops.clear();
    for (absl::string_view op : absl::StrSplit(o.simulate_mps_unsupported_ops, ',', absl::SkipWhitespace())) {
      if (!absl::StartsWith(absl::StripAsciiWhitespace(op), "aten::")) {
        return absl::InvalidArgumentError(
            absl::StrCat("--simulate-mps-unsupported-ops: '", op, "' is not an aten op such as aten::max_pool2d"));
      }
      d.mps_unsupported_ops.push_back(std::string(absl::StripAsciiWhitespace(op)));
    }
  }
  d.nvml_library = o.nvml_library;
  absl::StatusOr<std::vector<DeviceRequest>> failing = ParseDeviceAllowList(o.simulate_failing_devices);
  if (!failing.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--simulate-failing-devices: ", failing.status().message()));
  }
  for (const DeviceRequest& r : *failing) {
    DeviceId id{r.kind, r.kind == DeviceKind::kCuda ? r.index : 0};
    bool simulated = false;
    for (const SimulatedDeviceSpec& s : d.simulated) simulated |= s.id == id;
    if (!simulated || r.any_index) {
      return absl::InvalidArgumentError(absl::StrCat("--simulate-failing-devices: ", id.ToString(),
                                                     " is not in --simulate-devices"));
    }
    d.failing.push_back(id);
  }
  d.fail_after_runs = std::max<int64_t>(0, o.simulate_failures_after);
  return d;
}

}  // namespace infergate
