// infergate server entry point: discovers devices, scans the model
// repository, serves gRPC until SIGTERM/SIGINT, then drains.

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <signal.h>
#include <sys/resource.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <chrono>
#include <cstdio>
#include <iostream>
#include <future>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/units.h"
#include "devices/caching_cpu_allocator.h"
#include "devices/device_registry.h"
#include "devices/host_requirements.h"
#include "devices/system_info.h"
#include "devices/torch_probe.h"
#include "scheduler/inference_core.h"
#include "service/front_end.h"
#include "service/inference_service.h"
#include "service/liveness_watchdog.h"
#include "service/memory_return.h"
#include "service/metrics.h"
#include "service/model_mesh_runtime.h"
#include "service/open_inference_rest.h"
#include "service/open_inference_service.h"
#include "service/server_options.h"
#include "service/stop_signals.h"

namespace infergate {
namespace {

// Raises the soft limit on open files to the hard one: every client
// connection holds a descriptor, and at a soft limit of 1024 a flood of
// idle sockets would leave none for model files, REST or the metrics port.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    LOG_INFO << "open file limit raised from " << before << " to " << limit.rlim_cur;
  }
}

LogLevel ParseLevel(const std::string& s) {
  if (s == "debug") return LogLevel::kDebug;
  if (s == "warning") return LogLevel::kWarning;
  if (s == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

// How often the TLS files are looked at for changes (certificate rotation,
// e.g. cert-manager renewing a Kubernetes Secret); the new certificate is
// used for connections made after that.
constexpr unsigned kTlsReloadSeconds = 5;

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsCredentials(const ServerOptions& opts) {
  // Read once here so a missing or unreadable file stops the start with a
  // message naming the flag; gRPC's watcher then keeps them current.
  for (const auto& [path, flag] : {std::pair<std::string, const char*>{opts.tls_cert, "--tls-cert"},
                                   {opts.tls_key, "--tls-key"},
                                   {opts.tls_client_ca, "--tls-client-ca"}}) {
    if (path.empty()) continue;
    if (absl::StatusOr<std::string> text = ReadFile(path, flag); !text.ok()) return text.status();
  }
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      opts.tls_key, opts.tls_cert, opts.tls_client_ca, kTlsReloadSeconds);
  grpc::experimental::TlsServerCredentialsOptions tls(provider);
  tls.watch_identity_key_cert_pairs();
  if (opts.tls_client_ca.empty()) {
    tls.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    tls.watch_root_certs();
    tls.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(tls);
}

// Request and reply buffers of a megabyte or more get their own mappings,
// returned to the system when freed. glibc otherwise raises its mmap
// threshold after the first such free (up to 32 MiB) and serves later large
// buffers from per-thread arenas that keep the memory: measured with a
// sustained burst of 3.6 MB requests against a 32 MiB in-flight budget,
// peak RSS grew 165 MiB with the default and 91 MiB with this.
void ReturnLargeBuffersToTheSystem() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
}

// Drops gRPC's reflection plugin from a server builder. Linking gRPC's
// reflection library registers the plugin for every server at load time,
// so leaving reflection off takes removing it, not just not adding it.
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    std::erase_if(*plugins, [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
      return dynamic_cast<grpc::reflection::ProtoServerReflectionPlugin*>(p.get()) != nullptr;
    });
  }
};

int Run(int argc, char** argv) {
  std::string help;
  absl::StatusOr<ServerOptions> parsed = ParseServerOptions(argc, argv, &help);
  if (!parsed.ok()) {
    std::cerr << "infergate: " << parsed.status().message() << "\n";
    return 2;
  }
  if (!help.empty()) {
    std::cout << help;
    return 0;
  }
  const ServerOptions& opts = *parsed;
  SetMinLogLevel(ParseLevel(opts.log_level));
  // Debian builds Abseil without NDEBUG, which leaves absl::Mutex's
  // lock-order graph on for every lock gRPC takes: a few per cent of the
  // CPU at high request rates, for a check meant for debug builds.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  ReturnLargeBuffersToTheSystem();
  RaiseOpenFileLimit();
  // Before any tensor exists, so every tensor block comes back to it.
  if (CachingCpuAllocator::InstallForProcess(opts.cpu_tensor_cache_bytes) != nullptr) {
    LOG_INFO << "CPU tensor blocks of 64 KiB and more are kept for reuse, up to "
             << FormatBytes(opts.cpu_tensor_cache_bytes);
  }

  // SIGTERM/SIGINT start a drain whichever thread receives them, also
  // during warm-up (the drain then begins once warm-up ends).
  if (!StopSignals::Install()) {
    std::cerr << "infergate: cannot install the SIGTERM/SIGINT handlers\n";
    return 1;
  }

  // Before LibTorch sizes its thread pools, which would die with a stack
  // trace without /proc.
  if (absl::Status host = CheckHostRequirements(); !host.ok()) {
    std::cerr << "infergate: " << host.message() << "\n";
    return 1;
  }
  absl::StatusOr<DeviceRegistry> discovered = DeviceRegistry::Discover(opts.discovery);
  if (!discovered.ok()) {
    std::cerr << "infergate: " << discovered.status().message() << "\n";
    return 2;
  }
  InferenceCore core(opts.model_repository, *std::move(discovered), opts.scheduler);
  // Requests held at once are bounded in bytes, so a burst of large ones is
  // refused instead of growing the process past its memory limit.
  uint64_t inflight_bytes = opts.max_inflight_bytes;
  if (inflight_bytes == 0) inflight_bytes = std::max<uint64_t>(ReadHostMemory().total_bytes / 4, opts.max_receive_bytes);
  InflightBudget budget(inflight_bytes);
  LOG_INFO << "in-flight request budget " << inflight_bytes << " bytes";
  // Once a second, after 64 MiB of requests came and went and none is in
  // flight, freed memory goes back to the system.
  MemoryReturner memory_returner(budget, std::chrono::seconds(1), uint64_t{64} << 20);
  std::unique_ptr<Metrics> metrics;
  if (!opts.metrics_address.empty()) {
    absl::StatusOr<std::unique_ptr<Metrics>> started =
        Metrics::Start(opts.metrics_address, core, {INFERGATE_VERSION, TorchVersion(), grpc::Version()}, &budget);
    if (!started.ok()) {
      std::cerr << "infergate: " << started.status().message() << "\n";
      return 2;
    }
    metrics = *std::move(started);
    core.SetObserver(metrics.get());
    std::string mhost = opts.metrics_address.substr(0, opts.metrics_address.rfind(':'));
    LOG_INFO << "metrics on http://" << mhost << ":" << metrics->port() << "/metrics";
    // Tests and scripts read the metrics port from this line.
    std::printf("infergate metrics on %s:%d\n", mhost.c_str(), metrics->port());
    std::fflush(stdout);
  }
  absl::StatusOr<TokenAuth> auth = TokenAuth::FromFiles(opts.auth_token_file, opts.admin_token_file,
                                                        opts.disable_admin);
  if (!auth.ok()) {
    std::cerr << "infergate: " << auth.status().message() << "\n";
    return 2;
  }
  // Mutual TLS authenticates every caller; otherwise say what anyone who
  // reaches the port may do without a token.
  if (const std::string open = auth->OpenToAnyone();
      !open.empty() && opts.tls_client_ca.empty() && ListensBeyondLoopback(opts.address)) {
    LOG_WARNING << "serving " << opts.address << (opts.tls_cert.empty() ? " without TLS" : "")
                << ": anyone who reaches the port may use " << open << " without a token. Set "
                << "--auth-token-file (inference) and --admin-token-file or --disable-admin (load, unload), "
                << "--tls-client-ca for mutual TLS, or keep the port behind a network policy.";
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!opts.tls_cert.empty()) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> tls = TlsCredentials(opts);
    if (!tls.ok()) {
      std::cerr << "infergate: " << tls.status().message() << "\n";
      return 2;
    }
    credentials = *std::move(tls);
  }
  // Every inference front end takes one call path, with these tokens,
  // limits and budget, and drains on one switch.
  FrontEnd front_end(InferBackend::Of(core), opts.tensor_limits, *std::move(auth), &budget, metrics.get());
  InferenceServiceImpl service(core, front_end);
  // The REST API, on its own port, with the same tokens, budget and limits.
  std::unique_ptr<OpenInferenceRest> rest;
  std::unique_ptr<HttpServer> http;
  if (!opts.http_address.empty()) {
    rest = std::make_unique<OpenInferenceRest>(core, front_end, INFERGATE_VERSION, opts.max_receive_bytes);
    HttpServerOptions h;
    h.address = opts.http_address;
    h.flag_name = "--http-address";
    h.threads = opts.http_threads;
    h.max_body_bytes = opts.max_receive_bytes;
    h.request_timeout = opts.http_request_timeout;
    h.max_connections = static_cast<size_t>(opts.http_max_connections);
    // Probes are answered even when clients hold every connection slot.
    h.reserved_connections = 32;
    h.reserved_path_prefix = "/v2/health/";
    h.tls_cert = opts.tls_cert;
    h.tls_key = opts.tls_key;
    h.tls_client_ca = opts.tls_client_ca;
    absl::StatusOr<std::unique_ptr<HttpServer>> started =
        HttpServer::Start(
            std::move(h),
            [r = rest.get()](std::shared_ptr<HttpRequest> req, HttpResponder respond) {
              r->Handle(std::move(req), std::move(respond));
            },
            [r = rest.get()](const HttpRequest& head) { return r->Screen(head); });
    if (!started.ok()) {
      std::cerr << "infergate: " << started.status().message() << "\n";
      return 2;
    }
    http = *std::move(started);
    std::string hhost = opts.http_address.substr(0, opts.http_address.rfind(':'));
    LOG_INFO << "Open Inference Protocol REST API on " << (opts.tls_cert.empty() ? "http" : "https") << "://"
             << hhost << ":" << http->port() << "/v2";
    // Tests and scripts read the REST port from this line.
    std::printf("infergate http on %s:%d\n", hhost.c_str(), http->port());
    std::fflush(stdout);
  }
  OpenInferenceService open_inference(core, front_end, INFERGATE_VERSION);

  grpc::EnableDefaultHealthCheckService(true);
  const bool reflection = ServesReflection(opts);
  if (reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  if (!reflection && opts.reflection == ServerOptions::Reflection::kAuto) {
    LOG_INFO << "server reflection off: tokens are configured and reflection needs none (--reflection=on serves it)";
  }
  grpc::ServerBuilder builder;
  int port = 0;
  if (!reflection) builder.SetOption(std::make_unique<WithoutReflection>());
  builder.AddListeningPort(opts.address, credentials, &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(opts.max_receive_bytes));
  // No grpc::ResourceQuota: under pressure gRPC 1.51 breaks connections
  // (measured: 48 clients sending 2 MB requests against an 8 MiB quota got
  // "Broken pipe" on a fifth of their calls, and no call through), where the
  // in-flight budget refuses the excess calls cleanly.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, static_cast<int>(opts.max_concurrent_streams));
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, static_cast<int>(opts.grpc_handshake_timeout.count()));
  if (opts.max_connection_idle.count() > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, static_cast<int>(opts.max_connection_idle.count()));
  }
  if (opts.max_connection_age.count() > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, static_cast<int>(opts.max_connection_age.count()));
    // Calls in progress when the age is reached get this long to finish.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, 30000);
  }
  builder.RegisterService(&service);
  builder.RegisterService(&open_inference);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    LOG_ERROR << "cannot listen on " << opts.address;
    return 1;
  }
  // ModelMesh's SPI on its own port, without tokens: loopback only (the
  // options refuse other addresses), where ModelMesh's container reaches it.
  std::unique_ptr<ModelMeshRuntime> model_mesh;
  std::unique_ptr<grpc::Server> model_mesh_server;
  if (!opts.modelmesh_address.empty()) {
    model_mesh = std::make_unique<ModelMeshRuntime>(
        core, ModelMeshOptions{opts.modelmesh_model_root, opts.modelmesh_load_timeout,
                               opts.modelmesh_default_model_size, INFERGATE_VERSION});
    grpc::ServerBuilder mesh_builder;
    int mesh_port = 0;
    mesh_builder.SetOption(std::make_unique<WithoutReflection>());
    mesh_builder.AddListeningPort(opts.modelmesh_address, grpc::InsecureServerCredentials(), &mesh_port);
    mesh_builder.RegisterService(model_mesh.get());
    model_mesh_server = mesh_builder.BuildAndStart();
    if (!model_mesh_server || (mesh_port == 0 && !absl::StartsWith(opts.modelmesh_address, "unix:"))) {
      LOG_ERROR << "--modelmesh-address: cannot listen on " << opts.modelmesh_address;
      server->Shutdown();
      return 1;
    }
    std::string mesh_host = opts.modelmesh_address.substr(0, opts.modelmesh_address.rfind(':'));
    LOG_INFO << "ModelMesh model-runtime SPI on " << opts.modelmesh_address;
    // Tests and scripts read the SPI's port from this line.
    std::printf("infergate modelmesh on %s:%d\n", mesh_host.c_str(), mesh_port);
    std::fflush(stdout);
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  const std::string kService = "infergate.v1.InferenceService";
  const std::string kOpenInference = "inference.GRPCInferenceService";
  health->SetServingStatus(false);
  // Liveness stays SERVING while the process can answer, drain included;
  // readiness ("" and the service name) follows scanning, warm-up and drain.
  health->SetServingStatus("liveness", true);

  std::string host = opts.address.substr(0, opts.address.rfind(':'));
  LOG_INFO << "infergate listening on " << host << ":" << port << ", model repository " << opts.model_repository;
  // Tests and scripts read the bound port from this line.
  std::printf("infergate listening on %s:%d\n", host.c_str(), port);
  std::fflush(stdout);

  // The first stop signal is read at once, also during warm-up, so the log
  // shows it arrived; the drain itself starts once warm-up ends.
  std::promise<int> signalled;
  std::shared_future<int> first_signal = signalled.get_future().share();
  std::thread signal_reader([&signalled, &core] {
    int sig = StopSignals::WaitForFirst();
    if (!core.ready()) LOG_INFO << "signal " << sig << " during start-up: draining once warm-up ends";
    signalled.set_value(sig);
  });
  if (absl::Status s = core.Start(); !s.ok()) {
    LOG_ERROR << s.message();
    server->Shutdown();
    signal_reader.detach();  // blocked reading the signal pipe; the process ends now
    return 1;
  }
  std::unique_ptr<LivenessWatchdog> watchdog;
  if (opts.stuck_batch_timeout.count() > 0) {
    watchdog = std::make_unique<LivenessWatchdog>(
        core, opts.stuck_batch_timeout, [health](bool live) { health->SetServingStatus("liveness", live); });
  }
  if (first_signal.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    health->SetServingStatus(true);
    health->SetServingStatus(kService, true);
    health->SetServingStatus(kOpenInference, true);
    LOG_INFO << "serving";
  }

  int sig = first_signal.get();
  signal_reader.join();
  // Drain: probes see NOT_SERVING, new calls get UNAVAILABLE, accepted
  // work finishes (up to --drain-timeout), then gRPC shuts down.
  LOG_INFO << "signal " << sig << ": draining for up to " << opts.drain_timeout.count()
           << " ms (a second signal is ignored, a third ends the process at once)";
  // Readiness only: the catch-all setter would turn liveness NOT_SERVING
  // too, and a liveness failure during the drain gets the pod killed.
  health->SetServingStatus("", false);
  health->SetServingStatus(kService, false);
  health->SetServingStatus(kOpenInference, false);
  front_end.StartDraining();
  auto deadline = std::chrono::steady_clock::now() + opts.drain_timeout;
  // The gRPC port stays open while the accepted work finishes, so probes
  // keep getting answers (readiness NOT_SERVING, liveness SERVING: a closed
  // port would fail Kubernetes' gRPC liveness probe and get the pod killed
  // mid-drain) and new inference calls get the services' UNAVAILABLE. Then
  // gRPC shuts down: GOAWAY, and the replies of finished work get at least
  // a second to be written; calls still open after that are cancelled.
  bool idle = core.Drain(deadline);
  if (!idle) LOG_WARNING << "drain timeout passed with work still queued or running";
  auto shutdown_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  if (model_mesh_server) model_mesh_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  // REST calls accepted before the drain have been answered; what is still
  // being written gets the rest of the grace period.
  if (http) http->Shutdown(std::max(shutdown_deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1)));
  watchdog.reset();
  core.Shutdown();
  // Only now can nothing answer a REST call any more.
  http.reset();
  core.SetObserver(nullptr);
  if (StopSignals::Count() > 1) LOG_INFO << "ignored " << StopSignals::Count() - 1 << " more stop signal(s) while draining";
  LOG_INFO << "stopped";
  return 0;
}

}  // namespace
}  // namespace infergate

int main(int argc, char** argv) { return infergate::Run(argc, argv); }
