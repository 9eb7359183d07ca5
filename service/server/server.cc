#include "service/server/server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/client_text.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/owned_temp_folder.h"
#include "common/status_macros.h"
#include "devices/device_registry.h"
#include "devices/system_info.h"
#include "devices/torch_probe.h"
#include "scheduler/core/inference_core.h"
#include "scheduler/repository/torchserve/torchserve_store.h"
#include "service/call/call_environment.h"
#include "service/call/handler_work_pool.h"
#include "service/call/inflight_budget.h"
#include "service/grpc/completion_queue_server.h"
#include "service/grpc/grpc_infer_calls.h"
#include "service/grpc/grpc_method.h"
#include "service/grpc/health_service.h"
#include "service/grpc/reflection_service.h"
#include "service/http/http_server.h"
#include "service/metrics/metrics.h"
#include "service/modelmesh/model_mesh_runtime.h"
#include "service/open_inference/open_inference_rest.h"
#include "service/open_inference/open_inference_service.h"
#include "service/server/liveness_watchdog.h"
#include "service/server/memory_return.h"
#include "service/torchserve/torchserve_grpc.h"
#include "service/torchserve/torchserve_rest.h"
#include "service/tracing/tracing.h"
#include "service/v1/inference_service.h"

namespace infergate {
namespace {

// How often the TLS files are looked at for changes (certificate rotation,
// e.g. cert-manager renewing a Kubernetes Secret); the new certificate is
// used for connections made after that.
constexpr unsigned kTlsReloadSeconds = 5;

// The largest request ModelMesh's runtime port takes: its requests name a
// model (id, path, type, key), nothing more.
constexpr int kModelMeshMaxRequestBytes = 1 << 20;

// The health service's names: readiness ("" and the two services) follows
// scanning, warm-up and drain; liveness stays SERVING while the process
// can answer.
const char* const kReadinessServices[] = {"", "infergate.v1.InferenceService", "inference.GRPCInferenceService"};

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

std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }

}  // namespace

// Declared in the order they are built; destroyed in reverse, so nothing
// goes before what may still call it.
struct Server::Parts {
  ServerOptions options;
  std::unique_ptr<TorchServeStore> torchserve;  // owns the repository it laid out: outlives the core
  std::unique_ptr<InferenceCore> core;
  std::unique_ptr<InflightBudget> budget;
  std::unique_ptr<MemoryReturner> memory_returner;
  std::unique_ptr<Tracing> tracing;
  // The trace extension's settings while tracing is off (level OFF).
  std::unique_ptr<TraceSettings> trace_settings_off;
  std::unique_ptr<Metrics> metrics;
  // Stopped (its queued work run) once no new request can arrive, before
  // the core shuts down; outlives nothing that its work refers to.
  std::unique_ptr<HandlerWorkPool> handler_pool;
  std::unique_ptr<CallEnvironment> environment;
  std::unique_ptr<InferenceServiceImpl> service;
  std::unique_ptr<OpenInferenceRest> rest;
  std::unique_ptr<TorchServeRest> torchserve_rest;
  std::unique_ptr<HttpServer> http;
  std::unique_ptr<OpenInferenceService> open_inference;
  std::unique_ptr<TorchServeGrpcService> torchserve_grpc;
  // The gRPC methods beside inference, the inference RPCs, and the
  // services that are only methods of the table; they outlive the
  // completion queues' calls.
  std::unique_ptr<GrpcMethods> grpc_methods;
  std::unique_ptr<GrpcInferCalls> grpc_infer_calls;
  std::unique_ptr<HealthService> health;
  std::unique_ptr<ReflectionService> reflection;
  // Stopped before the server goes, and its queues outlive the server.
  std::unique_ptr<CompletionQueueServer> queued_infer;
  std::unique_ptr<grpc::Server> grpc_server;
  std::unique_ptr<ModelMeshRuntime> model_mesh;
  std::unique_ptr<grpc::Server> model_mesh_server;
  std::unique_ptr<LivenessWatchdog> watchdog;
  int port = 0;
  int modelmesh_port = 0;
  bool drained = false;
};

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const ServerOptions& given, const std::string& version) {
  auto p = std::make_unique<Parts>();
  ServerOptions opts = given;
  // A TorchServe model store is laid out as a repository of our own first.
  std::string repository = opts.model_repository;
  if (IsTorchServeStore(opts.model_repository)) {
    ASSIGN_OR_RETURN(p->torchserve,
                     TorchServeStore::Open(opts.model_repository, TorchServeStoreOptions{opts.mar_max_bytes, ""}));
    repository = p->torchserve->repository();
    if (opts.torchserve_addresses) {
      RETURN_IF_ERROR(ApplyTorchServeAddresses(p->torchserve->config().addresses, opts));
    }
  }
  p->options = opts;
  // Paths under the server's own folders reach clients relative to them
  // (client_text.h): the model repository, the working folders uploads and
  // packages are unpacked into, ModelMesh's model root.
  for (const std::string& folder : {repository, opts.modelmesh_model_root, TemporaryFolder()}) {
    if (folder.empty()) continue;
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::weakly_canonical(folder, ec);
    if (!ec) RegisterPrivateFolder(absolute.string());
  }
  absl::StatusOr<DeviceRegistry> discovered = DeviceRegistry::Discover(opts.discovery);
  if (!discovered.ok()) return discovered.status();
  p->core = std::make_unique<InferenceCore>(repository, *std::move(discovered), opts.scheduler);
  // Requests held at once are bounded in bytes, so a burst of large ones is
  // refused instead of growing the process past its memory limit.
  uint64_t inflight_bytes = opts.max_inflight_bytes;
  if (inflight_bytes == 0)
    inflight_bytes = std::max<uint64_t>(ReadHostMemory().total_bytes / 4, opts.max_receive_bytes);
  p->budget = std::make_unique<InflightBudget>(inflight_bytes);
  LOG_INFO << "in-flight request budget " << inflight_bytes << " bytes";
  // Once a second, after 64 MiB of requests came and went and none is in
  // flight, freed memory goes back to the system.
  p->memory_returner = std::make_unique<MemoryReturner>(*p->budget, std::chrono::seconds(1), uint64_t{64} << 20);
  if (opts.tracing.enabled) {
    absl::StatusOr<std::unique_ptr<Tracing>> tracing = Tracing::Create(opts.tracing);
    if (!tracing.ok()) return tracing.status();
    p->tracing = *std::move(tracing);
  }
  if (!opts.metrics_address.empty()) {
    ASSIGN_OR_RETURN(p->metrics,
                     Metrics::Start(opts.metrics_address, *p->core, {version, TorchVersion(), grpc::Version()},
                                    p->budget.get(), p->tracing.get()));
    if (opts.torchserve_metrics) p->metrics->ExportTorchServeNames(p->torchserve ? &p->torchserve->catalog() : nullptr);
    p->core->SetObserver(p->metrics.get());
    LOG_INFO << "metrics on http://" << HostOf(opts.metrics_address) << ":" << p->metrics->port() << "/metrics";
  }
  absl::StatusOr<TokenAuth> auth = TokenAuth::FromFiles(opts.auth_token_file, opts.admin_token_file,
                                                        opts.disable_admin    ? TokenAuth::AdminAccess::kDisabled
                                                        : opts.open_admin_api ? TokenAuth::AdminAccess::kOpen
                                                                              : TokenAuth::AdminAccess::kTokenOnly);
  if (!auth.ok()) return auth.status();
  auth->SetHostNames(opts.http_host_names);
  auth->SetLoopbackOnly(!opts.http_address.empty() && !ListensBeyondLoopback(opts.http_address));
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
    ASSIGN_OR_RETURN(credentials, TlsCredentials(opts));
  }
  // Every inference front end takes one call path, with these tokens,
  // limits and budget, and drains on one switch.
  // The built-in handlers' image decoding: a thread per core, a bounded queue.
  const int handler_threads = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  p->handler_pool = std::make_unique<HandlerWorkPool>(handler_threads, static_cast<size_t>(handler_threads) * 64);
  // Triton's trace extension reads and sets the tracer's settings, or,
  // with tracing off, settings of its own whose level stays OFF.
  if (!p->tracing) p->trace_settings_off = std::make_unique<TraceSettings>(/*exporting=*/false);
  TraceSettings* trace_settings = p->tracing ? &p->tracing->settings() : p->trace_settings_off.get();
  p->environment = std::make_unique<CallEnvironment>(InferBackend::Of(*p->core), opts.tensor_limits, *std::move(auth),
                                                     p->budget.get(), p->metrics.get(), p->tracing.get(),
                                                     p->handler_pool.get(), trace_settings);
  p->service = std::make_unique<InferenceServiceImpl>(*p->core, *p->environment);
  // The REST API, on its own port, with the same tokens, budget and limits.
  if (!opts.http_address.empty()) {
    p->rest = std::make_unique<OpenInferenceRest>(*p->core, *p->environment, version, opts.max_receive_bytes);
    // TorchServe's and KServe V1's routes beside the Open Inference Protocol's.
    p->torchserve_rest = std::make_unique<TorchServeRest>(*p->core, *p->environment,
                                                          p->torchserve ? &p->torchserve->catalog() : nullptr);
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
    absl::StatusOr<std::unique_ptr<HttpServer>> started = HttpServer::Start(
        std::move(h),
        [r = p->rest.get(), t = p->torchserve_rest.get()](std::shared_ptr<HttpRequest> req, HttpResponder respond) {
          if (TorchServeRest::Serves(req->path)) return t->Handle(std::move(req), std::move(respond));
          r->Handle(std::move(req), std::move(respond));
        },
        [r = p->rest.get(), t = p->torchserve_rest.get()](const HttpRequest& head) {
          return TorchServeRest::Serves(head.path) ? t->Screen(head) : r->Screen(head);
        });
    if (!started.ok()) return started.status();
    p->http = *std::move(started);
    LOG_INFO << "Open Inference Protocol REST API on " << (opts.tls_cert.empty() ? "http" : "https") << "://"
             << HostOf(opts.http_address) << ":" << p->http->port() << "/v2";
  }
  p->open_inference = std::make_unique<OpenInferenceService>(*p->core, *p->environment, version);
  p->torchserve_grpc = std::make_unique<TorchServeGrpcService>(*p->core, *p->environment,
                                                               p->torchserve ? &p->torchserve->catalog() : nullptr);

  // Every method but inference is a method of the completion-queue front
  // end's table: health, the listings and loads, metadata, reflection.
  p->grpc_methods = std::make_unique<GrpcMethods>();
  p->health = std::make_unique<HealthService>();
  p->health->Register(*p->grpc_methods);
  p->grpc_infer_calls = std::make_unique<GrpcInferCalls>();
  p->service->Register(*p->grpc_methods, *p->grpc_infer_calls);
  p->open_inference->Register(*p->grpc_methods, *p->grpc_infer_calls);
  p->torchserve_grpc->Register(*p->grpc_methods, *p->grpc_infer_calls);
  const bool reflection = ServesReflection(opts);
  if (reflection) {
    p->reflection = std::make_unique<ReflectionService>(*p->grpc_methods);
    p->reflection->Register(*p->grpc_methods);
  } else if (opts.reflection == ServerOptions::Reflection::kAuto) {
    LOG_INFO << "server reflection off: tokens are configured and reflection needs none (--reflection=on serves it)";
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort(opts.address, credentials, &p->port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(opts.max_receive_bytes));
  // No grpc::ResourceQuota: under pressure gRPC 1.51 breaks connections
  // (measured: 48 clients sending 2 MB requests against an 8 MiB quota got
  // "Broken pipe" on a fifth of their calls, and no call through), where the
  // in-flight budget refuses the excess calls cleanly.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, static_cast<int>(opts.max_concurrent_streams));
  // gRPC binds with SO_REUSEPORT unless told not to: a second server on a
  // port in use would start without a word and take half its connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(opts.grpc_handshake_timeout.count()));
  if (opts.max_connection_idle.count() > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, static_cast<int>(opts.max_connection_idle.count()));
  }
  if (opts.max_connection_age.count() > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, static_cast<int>(opts.max_connection_age.count()));
    // Calls in progress when the age is reached get this long to finish.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, 30000);
  }
  // HTTP/2 flow control holds what the server has not read with the
  // client, but only while a stream's window stays small: gRPC's
  // bandwidth-delay probe grows it until a whole message fits, and a call
  // waiting for room in the in-flight budget (intake_gate.h) then sits in
  // memory anyway. Off unless asked for (long, fast links).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, opts.grpc_bdp_probe ? 1 : 0);
  // Only ModelStreamInfer is registered with gRPC; every other method is
  // taken as a generic call, its message unread until it is allowed and
  // paid for (completion_queue_server.h).
  builder.RegisterService(p->open_inference.get());
  CompletionQueueServer::IntakeOptions intake;
  intake.max_message_bytes = opts.max_receive_bytes;
  intake.min_receive_rate = opts.min_receive_rate;
  intake.max_reads_per_address = opts.max_reads_per_address;
  p->queued_infer =
      std::make_unique<CompletionQueueServer>(builder, static_cast<int>(opts.grpc_infer_threads), *p->environment,
                                              *p->grpc_methods, *p->grpc_infer_calls, intake);
  p->grpc_server = builder.BuildAndStart();
  if (!p->grpc_server || p->port == 0) return absl::UnavailableError(absl::StrCat("cannot listen on ", opts.address));
  // ModelMesh's SPI on its own port, without tokens: loopback only (the
  // options refuse other addresses), where ModelMesh's container reaches it.
  if (!opts.modelmesh_address.empty()) {
    p->model_mesh = std::make_unique<ModelMeshRuntime>(
        *p->core, ModelMeshOptions{opts.modelmesh_model_root, opts.modelmesh_load_timeout,
                                   opts.modelmesh_default_model_size, version});
    grpc::ServerBuilder mesh_builder;
    mesh_builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    // ModelMesh's requests are a model's id, path and type: gRPC reads them
    // whole before the service sees them, so the port takes small ones only.
    mesh_builder.SetMaxReceiveMessageSize(kModelMeshMaxRequestBytes);
    mesh_builder.AddListeningPort(opts.modelmesh_address, grpc::InsecureServerCredentials(), &p->modelmesh_port);
    mesh_builder.RegisterService(p->model_mesh.get());
    p->model_mesh_server = mesh_builder.BuildAndStart();
    if (!p->model_mesh_server || (p->modelmesh_port == 0 && !absl::StartsWith(opts.modelmesh_address, "unix:"))) {
      p->grpc_server->Shutdown();
      return absl::UnavailableError(absl::StrCat("--modelmesh-address: cannot listen on ", opts.modelmesh_address));
    }
    LOG_INFO << "ModelMesh model-runtime SPI on " << opts.modelmesh_address;
  }
  p->queued_infer->Start();
  // Every readiness name answers NOT_SERVING from the start (a name never
  // set would answer NOT_FOUND during warm-up), liveness SERVING.
  for (const char* service : kReadinessServices) p->health->SetServingStatus(service, false);
  p->health->SetServingStatus("liveness", true);
  LOG_INFO << "infergate listening on " << HostOf(opts.address) << ":" << p->port << ", model repository "
           << opts.model_repository;
  return std::unique_ptr<Server>(new Server(std::move(p)));
}

Server::Server(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

Server::~Server() {
  // A server never drained (a failed start, a test) stops at once.
  if (!parts_->drained) Drain(std::chrono::steady_clock::now());
}

absl::Status Server::StartCore() {
  Parts& p = *parts_;
  RETURN_IF_ERROR(p.core->Start());
  if (p.options.stuck_batch_timeout.count() > 0) {
    HealthService* health = p.health.get();
    p.watchdog = std::make_unique<LivenessWatchdog>(
        *p.core, p.options.stuck_batch_timeout, [health](bool live) { health->SetServingStatus("liveness", live); });
  }
  return absl::OkStatus();
}

void Server::SetServing() {
  for (const char* service : kReadinessServices) parts_->health->SetServingStatus(service, true);
  LOG_INFO << "serving";
}

bool Server::Drain(std::chrono::steady_clock::time_point deadline) {
  Parts& p = *parts_;
  p.drained = true;
  // Readiness only: the catch-all setter would turn liveness NOT_SERVING
  // too, and a liveness failure during the drain gets the pod killed.
  for (const char* service : kReadinessServices) p.health->SetServingStatus(service, false);
  p.environment->StartDraining();
  // The gRPC port stays open while the accepted work finishes, so probes
  // keep getting answers and new inference calls get the services'
  // UNAVAILABLE. Then gRPC shuts down: GOAWAY, and the replies of finished
  // work get at least a second to be written; calls still open after that
  // are cancelled.
  const bool idle = p.core->Drain(deadline);
  if (!idle) LOG_WARNING << "drain timeout passed with work still queued or running";
  const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  p.grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  if (p.model_mesh_server) p.model_mesh_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  // REST calls accepted before the drain have been answered; what is still
  // being written gets the rest of the grace period.
  if (p.http) p.http->Shutdown(std::max(grace, std::chrono::steady_clock::now() + std::chrono::seconds(1)));
  p.watchdog.reset();
  // No request can arrive now: images still queued for decoding are
  // decoded and answered (refused, as the server drains) before the core goes.
  p.handler_pool.reset();
  p.core->Shutdown();
  // Every inference call has been answered: the completion queues can go.
  p.queued_infer->Stop();
  // Only now can nothing answer a REST call any more.
  p.http.reset();
  LOG_INFO << p.environment->tally().Summary();
  p.core->SetObserver(nullptr);
  // Every call has ended: its spans go out now, within what is left of the
  // drain time (from one to five seconds), so a stopping server loses none.
  if (p.tracing) {
    const auto left = std::clamp<std::chrono::steady_clock::duration>(deadline - std::chrono::steady_clock::now(),
                                                                      std::chrono::seconds(1), std::chrono::seconds(5));
    if (!p.tracing->Flush(std::chrono::duration_cast<std::chrono::milliseconds>(left))) {
      LOG_WARNING << "tracing: spans were still being exported when the drain time ran out";
    }
  }
  return idle;
}

int Server::port() const { return parts_->port; }
int Server::http_port() const { return parts_->http ? parts_->http->port() : 0; }
int Server::metrics_port() const { return parts_->metrics ? parts_->metrics->port() : 0; }
int Server::modelmesh_port() const { return parts_->modelmesh_port; }
InferenceCore& Server::core() { return *parts_->core; }

}  // namespace infergate
