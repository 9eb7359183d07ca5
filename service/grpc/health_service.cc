#include "service/grpc/health_service.h"

#include "grpc/health/v1/health.pb.h"
#include "service/grpc/raw_unary_call.h"

namespace infergate {

namespace health = grpc::health::v1;

// One Watch call: its service, and the call while it is open (null once
// the client left). Writes happen under `mu`, so the call cannot finish
// and go while one is being started.
struct HealthService::Watcher {
  std::string service;
  Mutex mu;
  GrpcServerCall* call ABSL_GUARDED_BY(mu) = nullptr;
  int last_sent ABSL_GUARDED_BY(mu) = -1;
};

namespace {

health::HealthCheckResponse::ServingStatus StatusOf(const std::map<std::string, bool>& serving,
                                                    const std::string& service, bool watch) {
  auto it = serving.find(service);
  if (it == serving.end()) {
    return watch ? health::HealthCheckResponse::SERVICE_UNKNOWN : health::HealthCheckResponse::UNKNOWN;
  }
  return it->second ? health::HealthCheckResponse::SERVING : health::HealthCheckResponse::NOT_SERVING;
}

}  // namespace

void HealthService::Register(GrpcMethods& methods) {
  constexpr absl::string_view kService = "grpc.health.v1.Health";
  GrpcMethod check;
  check.request_type = health::HealthCheckRequest::descriptor();
  check.serve = [this](GrpcServerCall& call) { Check(call); };
  methods.Add(kService, "Check", std::move(check));
  GrpcMethod watch;
  watch.shape = GrpcMethod::Shape::kServerStream;
  watch.request_type = health::HealthCheckRequest::descriptor();
  watch.serve = [this](GrpcServerCall& call) { Watch(call); };
  methods.Add(kService, "Watch", std::move(watch));
}

void HealthService::SetServingStatus(const std::string& service, bool serving) {
  {
    MutexLock lock(mu_);
    serving_[service] = serving;
  }
  Notify({service});
}

void HealthService::SetAll(bool serving) {
  std::vector<std::string> services;
  {
    MutexLock lock(mu_);
    for (auto& [name, value] : serving_) {
      value = serving;
      services.push_back(name);
    }
  }
  Notify(services);
}

void HealthService::Notify(const std::vector<std::string>& services) {
  std::vector<std::pair<std::shared_ptr<Watcher>, int>> told;
  {
    MutexLock lock(mu_);
    for (const std::string& service : services) {
      const int status = StatusOf(serving_, service, /*watch=*/true);
      for (auto [it, end] = watchers_.equal_range(service); it != end; ++it) told.emplace_back(it->second, status);
    }
  }
  for (auto& [watcher, status] : told) {
    MutexLock lock(watcher->mu);
    if (watcher->call == nullptr || watcher->last_sent == status) continue;
    health::HealthCheckResponse response;
    response.set_status(static_cast<health::HealthCheckResponse::ServingStatus>(status));
    watcher->last_sent = status;
    watcher->call->Write(response);
  }
}

void HealthService::Check(GrpcServerCall& server_call) {
  auto* call = RawUnaryCall<health::HealthCheckRequest, health::HealthCheckResponse>::Start(server_call);
  if (call == nullptr) return;
  health::HealthCheckResponse::ServingStatus status;
  {
    MutexLock lock(mu_);
    status = StatusOf(serving_, call->request().service(), /*watch=*/false);
  }
  if (status == health::HealthCheckResponse::UNKNOWN) {
    return call->Answer(absl::NotFoundError("unknown service"));
  }
  call->response()->set_status(status);
  call->Answer(absl::OkStatus());
}

void HealthService::Watch(GrpcServerCall& call) {
  health::HealthCheckRequest request;
  if (absl::Status parsed = ParseRequestBytes(call.request(), &request); !parsed.ok()) return call.Finish(parsed);
  auto watcher = std::make_shared<Watcher>();
  watcher->service = request.service();
  {
    MutexLock lock(watcher->mu);
    watcher->call = &call;
  }
  call.Keep(watcher);
  call.OnCancel([this, watcher] {
    {
      MutexLock lock(mu_);
      for (auto [it, end] = watchers_.equal_range(watcher->service); it != end; ++it) {
        if (it->second == watcher) {
          watchers_.erase(it);
          break;
        }
      }
    }
    GrpcServerCall* open;
    {
      MutexLock lock(watcher->mu);
      open = watcher->call;
      watcher->call = nullptr;
    }
    if (open != nullptr) open->Finish(absl::CancelledError("the watch ended"));
  });
  {
    MutexLock lock(mu_);
    watchers_.emplace(watcher->service, watcher);
  }
  Notify({watcher->service});
}

}  // namespace infergate
