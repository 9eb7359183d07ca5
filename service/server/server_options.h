#pragma once
// Everything the server can be told on its command line (or environment),
// parsed once into typed fields: durations, byte sizes, device lists and
// the core's options are checked here and never re-parsed later.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cpu_policy.h"
#include "devices/device_registry.h"
#include "scheduler/repository/torchserve/torchserve_config.h"
#include "scheduler/routing/scheduler_options.h"
#include "service/call/wire_tensor.h"
#include "service/tracing/tracing_options.h"

namespace infergate {

struct ServerOptions {
  std::string address = "0.0.0.0:50051";
  std::string model_repository = "./models";
  // A TorchServe model store as the repository (torchserve_store.h): the
  // most one .mar may extract to, and whether config.properties' addresses
  // replace --address, --http-address and --metrics-address.
  uint64_t mar_max_bytes = uint64_t{16} << 30;
  bool torchserve_addresses = false;
  // Also export TorchServe's metric names (Metrics::ExportTorchServeNames).
  bool torchserve_metrics = false;
  uint64_t max_receive_bytes = 64 << 20;
  // Bytes of inference requests held at once; 0 picks a quarter of the
  // memory there is (the container's limit, else the host's).
  uint64_t max_inflight_bytes = 0;
  // A gRPC request's message must come at least this fast (bytes a
  // second), after a grace of 5 s, or it is refused and its room in the
  // budget given back (intake_gate.h).
  uint64_t min_receive_rate = 1 << 20;
  // gRPC reads one client address may have unfinished at once.
  int max_reads_per_address = 64;
  uint64_t max_load_file_bytes = 0;   // model files one load may carry; 0 (the default) refuses them
  bool allow_native_uploads = false;  // those files may be native code (.pt2, shared libraries)
  // Freed CPU tensor blocks kept for reuse (CachingCpuAllocator); 0: off.
  uint64_t cpu_tensor_cache_bytes = 256 << 20;
  CodecLimits tensor_limits{8, int64_t{1} << 28};
  std::chrono::milliseconds drain_timeout{30000};
  // Liveness fails while a batch runs longer than this; 0 disables.
  std::chrono::milliseconds stuck_batch_timeout{300000};
  std::string metrics_address = "0.0.0.0:9464";
  // The Open Inference Protocol's REST API; empty disables it.
  std::string http_address = "0.0.0.0:8000";
  int http_threads = 2;
  // A request must arrive whole (and an answer be taken) within this long.
  std::chrono::milliseconds http_request_timeout{30000};
  int64_t http_max_connections = 1024;
  std::string tls_cert;       // PEM certificate chain; TLS when set
  std::string tls_key;        // PEM private key
  std::string tls_client_ca;  // PEM CA; mutual TLS when set
  std::string auth_token_file;
  std::string admin_token_file;
  bool disable_admin = false;
  // The admin RPCs (load, unload, uploads) for anyone without a token when
  // no --admin-token-file is given; off: they need an admin token.
  bool open_admin_api = false;
  // Names besides localhost, IP literals and the machine's own name that
  // REST admin requests may be addressed to (their Host header) while the
  // admin API is open without a token: a DNS-rebinding page's requests
  // carry the attacker's name.
  std::vector<std::string> http_host_names;
  // gRPC server reflection: kAuto serves it only when no token is
  // configured (with tokens, reflection would describe the API to anyone
  // who can reach the port: gRPC 1.51 cannot put a token check in front of
  // its reflection service, so closed by default means off).
  enum class Reflection { kAuto, kOn, kOff };
  Reflection reflection = Reflection::kAuto;
  std::chrono::milliseconds max_connection_age{0};  // 0: connections live forever
  // gRPC's bandwidth-delay probe, which grows HTTP/2 windows: off, so that
  // requests waiting for the in-flight budget stay with their clients.
  bool grpc_bdp_probe = false;
  // gRPC connections with no call for this long are closed (GOAWAY); 0: never.
  std::chrono::milliseconds max_connection_idle{std::chrono::minutes(5)};
  // A new gRPC connection must finish TLS and HTTP/2 set-up within this long.
  std::chrono::milliseconds grpc_handshake_timeout{std::chrono::seconds(10)};
  int64_t max_concurrent_streams = 256;  // per client connection
  // Threads polling a completion queue each for the unary inference calls
  // (completion_queue_server.h): they admit, decode and queue each call.
  int64_t grpc_infer_threads = 2;
  // The CPU policy of every thread but the device workers (cpu_policy.h):
  // main.cc sets it before the server starts a thread.
  CpuPolicy io_thread_policy = CpuPolicy::kBatch;
  // KServe ModelMesh's model-runtime SPI (service/modelmesh/model_mesh_runtime.h);
  // empty leaves it off. Loopback or a unix: socket only: it loads any
  // folder the server can read.
  std::string modelmesh_address;
  std::string modelmesh_model_root;  // modelPath must lie under it; empty: anywhere
  std::chrono::milliseconds modelmesh_load_timeout{120000};
  uint64_t modelmesh_default_model_size = uint64_t{256} << 20;
  std::string log_level = "info";
  // Request tracing (OpenTelemetry): the OTEL_* environment with the
  // tracing flags laid over it; off unless an endpoint is named.
  TracingOptions tracing;
  DiscoveryOptions discovery;
  SchedulerOptions scheduler;
};

// Parses argv (after INFERGATE_* environment variables; the command line
// wins). `*help_text` is set (and options left default) for --help. Errors
// are INVALID_ARGUMENT naming the flag.
absl::StatusOr<ServerOptions> ParseServerOptions(int argc, const char* const* argv, std::string* help_text);

// Whether a listening address ("host:port") may be reached from other
// machines: anything but loopback (127.0.0.0/8, ::1, localhost).
bool ListensBeyondLoopback(const std::string& address);

// Whether reflection is served under `options` (kAuto resolved).
bool ServesReflection(const ServerOptions& options);

// --torchserve-addresses: the addresses of a TorchServe config.properties
// replace `options`' (inference_address the REST address, metrics_address
// the metrics one, grpc_inference_port the gRPC one on all interfaces).
// INVALID_ARGUMENT naming the key for an address that is not
// http[s]://HOST:PORT, or https without --tls-cert.
absl::Status ApplyTorchServeAddresses(const TorchServeAddresses& addresses, ServerOptions& options);

}  // namespace infergate
