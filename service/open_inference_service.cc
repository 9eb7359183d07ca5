#include "service/open_inference_service.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/proto_enums.h"
#include "service/call_context.h"
#include "service/open_inference_api.h"
#include "service/open_inference_codec.h"
#include "service/open_inference_stream.h"
#include "service/status_convert.h"

namespace infergate {
namespace {


grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

OpenInferenceService::OpenInferenceService(InferenceCore& core, CodecLimits limits, Metrics* metrics, TokenAuth auth,
                                           std::string server_version, InflightBudget* budget)
    : core_(core),
      limits_(limits),
      metrics_(metrics),
      auth_(std::move(auth)),
      api_(core, std::move(server_version)),
      budget_(budget) {}


grpc::ServerUnaryReactor* OpenInferenceService::ServerLive(grpc::CallbackServerContext* ctx,
                                                           const inference::ServerLiveRequest*,
                                                           inference::ServerLiveResponse* response) {
  // Open like the health service, so probes need no token.
  response->set_live(true);
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* OpenInferenceService::ServerReady(grpc::CallbackServerContext* ctx,
                                                            const inference::ServerReadyRequest*,
                                                            inference::ServerReadyResponse* response) {
  response->set_ready(core_.ready() && !draining_.load());
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelReady(grpc::CallbackServerContext* ctx,
                                                           const inference::ModelReadyRequest* request,
                                                           inference::ModelReadyResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (Refused(auth_, *ctx, TokenAuth::Role::kInference, reactor)) return reactor;
  response->set_ready(api_.ModelReady(request->name(), request->version()) && !draining_.load());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* OpenInferenceService::ServerMetadata(grpc::CallbackServerContext* ctx,
                                                               const inference::ServerMetadataRequest*,
                                                               inference::ServerMetadataResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (Refused(auth_, *ctx, TokenAuth::Role::kInference, reactor)) return reactor;
  api_.ServerMetadata({}, response);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelMetadata(grpc::CallbackServerContext* ctx,
                                                              const inference::ModelMetadataRequest* request,
                                                              inference::ModelMetadataResponse* response) {
  absl::Status s = CheckToken(auth_, *ctx, TokenAuth::Role::kInference);
  if (s.ok()) s = api_.ModelMetadata(request->name(), request->version(), response);
  return Done(ctx, s);
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelConfig(grpc::CallbackServerContext* ctx,
                                                            const inference::ModelConfigRequest* request,
                                                            inference::ModelConfigResponse* response) {
  absl::Status s = CheckToken(auth_, *ctx, TokenAuth::Role::kInference);
  if (s.ok()) s = api_.ModelConfig(request->name(), request->version(), response);
  return Done(ctx, s);
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelInfer(grpc::CallbackServerContext* ctx,
                                                           const inference::ModelInferRequest* request,
                                                           inference::ModelInferResponse* response) {
  auto* reactor = new CancellableUnaryReactor();
  Clock::time_point received = Clock::now();
  // Finishes a call that never reached the core.
  auto refuse = [&](const absl::Status& status) {
    return FinishRefused(reactor, status, metrics_,
                         core_.KnownModel(request->model_name()) ? request->model_name() : "", received);
  };
  if (absl::Status s =
          AdmitInference(auth_, *ctx, draining_.load(), metrics_, budget_, request->ByteSizeLong(), reactor);
      !s.ok()) {
    return refuse(s);
  }
  InferenceRequest req;
  req.received = received;
  req.deadline = SteadyDeadline(*ctx);
  // Input tensors alias the request's bytes: gRPC keeps `request` alive until Finish.
  if (absl::Status s = DecodeInferRequest(*request, limits_, &req); !s.ok()) return refuse(s);
  std::shared_ptr<RequestHandle> handle = core_.Infer(
      std::move(req), [this, reactor, request, response, received](absl::StatusOr<InferenceResult> result,
                                                                    const RequestLabels& labels) {
        absl::Status status = result.status();
        if (status.ok()) status = EncodeInferResponse(*request, *result, response);
        if (metrics_) {
          metrics_->RecordInfer(labels, status, status.ok() ? &*result : nullptr, MicrosBetween(received, Clock::now()));
        }
        reactor->Finish(ToGrpcStatus(status));
      });
  reactor->set_handle(std::move(handle));
  return reactor;
}

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
OpenInferenceService::ModelStreamInfer(grpc::CallbackServerContext* ctx) {
  absl::Status refusal = CheckToken(auth_, *ctx, TokenAuth::Role::kInference);
  return new InferStreamReactor(core_, limits_, metrics_, budget_, draining_, SteadyDeadline(*ctx), refusal);
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelStatistics(grpc::CallbackServerContext* ctx,
                                                                const inference::ModelStatisticsRequest* request,
                                                                inference::ModelStatisticsResponse* response) {
  absl::Status s = CheckToken(auth_, *ctx, TokenAuth::Role::kInference);
  if (s.ok()) s = api_.ModelStatistics(request->name(), request->version(), response);
  return Done(ctx, s);
}

grpc::ServerUnaryReactor* OpenInferenceService::RepositoryIndex(grpc::CallbackServerContext* ctx,
                                                                const inference::RepositoryIndexRequest* request,
                                                                inference::RepositoryIndexResponse* response) {
  absl::Status s = CheckToken(auth_, *ctx, TokenAuth::Role::kInference);
  if (s.ok()) s = api_.RepositoryIndex(request->repository_name(), request->ready(), response);
  return Done(ctx, s);
}

grpc::ServerUnaryReactor* OpenInferenceService::RepositoryModelLoad(
    grpc::CallbackServerContext* ctx, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse*) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (Refused(auth_, *ctx, TokenAuth::Role::kAdmin, reactor)) return reactor;
  absl::StatusOr<LoadRequest> load = LoadRequestFromParameters(request->model_name(), request->parameters());
  if (!load.ok()) {
    reactor->Finish(ToGrpcStatus(load.status()));
    return reactor;
  }
  core_.LoadModel(*load, [reactor](absl::StatusOr<LoadResult> result) {
    reactor->Finish(ToGrpcStatus(result.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* OpenInferenceService::RepositoryModelUnload(
    grpc::CallbackServerContext* ctx, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (Refused(auth_, *ctx, TokenAuth::Role::kAdmin, reactor)) return reactor;
  absl::StatusOr<LoadRequest> unload = LoadRequestFromParameters(request->model_name(), request->parameters());
  absl::StatusOr<size_t> n = unload.ok() ? core_.UnloadModel(*unload) : absl::StatusOr<size_t>(unload.status());
  reactor->Finish(ToGrpcStatus(n.status()));
  return reactor;
}

}  // namespace infergate
