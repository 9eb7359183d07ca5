#include "service/open_inference_service.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "wire/proto_enums.h"
#include "service/call_context.h"
#include "service/open_inference_api.h"
#include "service/open_inference_codec.h"
#include "service/open_inference_extensions.h"
#include "service/status_convert.h"

namespace infergate {
namespace {


grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

OpenInferenceService::OpenInferenceService(InferenceCore& core, const FrontEnd& front_end,
                                           std::string server_version)
    : core_(core), front_end_(front_end), api_(core, std::move(server_version)) {}


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
  response->set_ready(core_.ready() && !front_end_.draining());
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelReady(grpc::CallbackServerContext* ctx,
                                                           const inference::ModelReadyRequest* request,
                                                           inference::ModelReadyResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (Refused(front_end_.auth(), *ctx, TokenAuth::Role::kInference, reactor)) return reactor;
  response->set_ready(api_.ModelReady(ModelNameOf(*ctx, request->name()), request->version()) && !front_end_.draining());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* OpenInferenceService::ServerMetadata(grpc::CallbackServerContext* ctx,
                                                               const inference::ServerMetadataRequest*,
                                                               inference::ServerMetadataResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (Refused(front_end_.auth(), *ctx, TokenAuth::Role::kInference, reactor)) return reactor;
  api_.ServerMetadata({}, response);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelMetadata(grpc::CallbackServerContext* ctx,
                                                              const inference::ModelMetadataRequest* request,
                                                              inference::ModelMetadataResponse* response) {
  absl::Status s = CheckToken(front_end_.auth(), *ctx, TokenAuth::Role::kInference);
  if (s.ok()) s = api_.ModelMetadata(ModelNameOf(*ctx, request->name()), request->version(), response);
  return Done(ctx, s);
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelConfig(grpc::CallbackServerContext* ctx,
                                                            const inference::ModelConfigRequest* request,
                                                            inference::ModelConfigResponse* response) {
  absl::Status s = CheckToken(front_end_.auth(), *ctx, TokenAuth::Role::kInference);
  if (s.ok()) s = api_.ModelConfig(request->name(), request->version(), response);
  return Done(ctx, s);
}

void OpenInferenceService::SubmitModelInfer(InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                                            const inference::ModelInferRequest* request,
                                            inference::ModelInferResponse* response) const {
  InferenceRequest req;
  req.deadline = SteadyDeadline(ctx);
  // Input tensors alias the request's bytes, which live until the call finishes.
  if (absl::Status s = DecodeInferRequest(*request, front_end_.limits(), &req); !s.ok()) return call.Refuse(s);
  req.model = model;
  call.Submit(std::move(req), [request, response](InferenceResult& result) {
    return EncodeInferResponse(*request, result, response);
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelStatistics(grpc::CallbackServerContext* ctx,
                                                                const inference::ModelStatisticsRequest* request,
                                                                inference::ModelStatisticsResponse* response) {
  absl::Status s = CheckToken(front_end_.auth(), *ctx, TokenAuth::Role::kInference);
  if (s.ok()) s = api_.ModelStatistics(request->name(), request->version(), response);
  return Done(ctx, s);
}

grpc::ServerUnaryReactor* OpenInferenceService::RepositoryIndex(grpc::CallbackServerContext* ctx,
                                                                const inference::RepositoryIndexRequest* request,
                                                                inference::RepositoryIndexResponse* response) {
  absl::Status s = CheckToken(front_end_.auth(), *ctx, TokenAuth::Role::kInference);
  if (s.ok()) s = api_.RepositoryIndex(request->repository_name(), request->ready(), response);
  return Done(ctx, s);
}

grpc::ServerUnaryReactor* OpenInferenceService::RepositoryModelLoad(
    grpc::CallbackServerContext* ctx, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse*) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (Refused(front_end_.auth(), *ctx, TokenAuth::Role::kAdmin, reactor)) return reactor;
  absl::StatusOr<LoadRequest> load = LoadRequestFromParameters(request->model_name(), request->parameters(), /*unload=*/false,
                                front_end_.limits().max_load_file_bytes);
  if (!load.ok()) {
    reactor->Finish(ToGrpcStatus(load.status()));
    return reactor;
  }
  // Model files sent with the load are held (and written out) until it ends:
  // they count against the in-flight budget like a request's tensors.
  auto held = std::make_shared<InflightBudget::Reservation>();
  if (front_end_.budget() && load->files) {
    absl::StatusOr<InflightBudget::Reservation> reserved = front_end_.budget()->Reserve(request->ByteSizeLong());
    if (!reserved.ok()) {
      reactor->Finish(ToGrpcStatus(reserved.status()));
      return reactor;
    }
    *held = *std::move(reserved);
  }
  core_.LoadModel(*load, [reactor, held](absl::StatusOr<LoadResult> result) {
    reactor->Finish(ToGrpcStatus(result.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* OpenInferenceService::RepositoryModelUnload(
    grpc::CallbackServerContext* ctx, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (Refused(front_end_.auth(), *ctx, TokenAuth::Role::kAdmin, reactor)) return reactor;
  absl::StatusOr<LoadRequest> unload =
      LoadRequestFromParameters(request->model_name(), request->parameters(), /*unload=*/true);
  absl::StatusOr<size_t> n = unload.ok() ? core_.UnloadModel(*unload) : absl::StatusOr<size_t>(unload.status());
  reactor->Finish(ToGrpcStatus(n.status()));
  return reactor;
}

// --- The extensions this server answers without serving them as Triton does.

grpc::ServerUnaryReactor* OpenInferenceService::Answer(grpc::CallbackServerContext* ctx,
                                                       const std::function<absl::Status()>& answer) {
  absl::Status s = CheckToken(front_end_.auth(), *ctx, TokenAuth::Role::kInference);
  if (s.ok()) s = answer();
  return Done(ctx, s);
}

grpc::ServerUnaryReactor* OpenInferenceService::SystemSharedMemoryStatus(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryStatusRequest* request,
    inference::SystemSharedMemoryStatusResponse*) {
  return Answer(ctx, [&] { return infergate::SharedMemoryStatus(SharedMemoryKind::kSystem, request->name()); });
}

grpc::ServerUnaryReactor* OpenInferenceService::SystemSharedMemoryRegister(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryRegisterRequest* request,
    inference::SystemSharedMemoryRegisterResponse*) {
  return Answer(ctx, [&] { return infergate::SharedMemoryRegister(SharedMemoryKind::kSystem, request->name()); });
}

grpc::ServerUnaryReactor* OpenInferenceService::SystemSharedMemoryUnregister(
    grpc::CallbackServerContext* ctx, const inference::SystemSharedMemoryUnregisterRequest* request,
    inference::SystemSharedMemoryUnregisterResponse*) {
  return Answer(ctx, [&] { return infergate::SharedMemoryUnregister(SharedMemoryKind::kSystem, request->name()); });
}

grpc::ServerUnaryReactor* OpenInferenceService::CudaSharedMemoryStatus(
    grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryStatusRequest* request,
    inference::CudaSharedMemoryStatusResponse*) {
  return Answer(ctx, [&] { return infergate::SharedMemoryStatus(SharedMemoryKind::kCuda, request->name()); });
}

grpc::ServerUnaryReactor* OpenInferenceService::CudaSharedMemoryRegister(
    grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryRegisterRequest* request,
    inference::CudaSharedMemoryRegisterResponse*) {
  return Answer(ctx, [&] { return infergate::SharedMemoryRegister(SharedMemoryKind::kCuda, request->name()); });
}

grpc::ServerUnaryReactor* OpenInferenceService::CudaSharedMemoryUnregister(
    grpc::CallbackServerContext* ctx, const inference::CudaSharedMemoryUnregisterRequest* request,
    inference::CudaSharedMemoryUnregisterResponse*) {
  return Answer(ctx, [&] { return infergate::SharedMemoryUnregister(SharedMemoryKind::kCuda, request->name()); });
}

grpc::ServerUnaryReactor* OpenInferenceService::TraceSetting(grpc::CallbackServerContext* ctx,
                                                             const inference::TraceSettingRequest* request,
                                                             inference::TraceSettingResponse*) {
  return Answer(ctx, [&] { return TraceSettingAnswer(request->model_name()); });
}

grpc::ServerUnaryReactor* OpenInferenceService::LogSettings(grpc::CallbackServerContext* ctx,
                                                            const inference::LogSettingsRequest* request,
                                                            inference::LogSettingsResponse* response) {
  // Reading needs the inference token; changing the server's logging, the admin one.
  const bool change = request->settings_size() > 0;
  absl::Status s = CheckToken(front_end_.auth(), *ctx, change ? TokenAuth::Role::kAdmin : TokenAuth::Role::kInference);
  if (!s.ok()) return Done(ctx, s);
  infergate::LogSettings changes;
  for (const auto& [key, value] : request->settings()) {
    switch (value.parameter_choice_case()) {
      case inference::LogSettingsRequest::SettingValue::kBoolParam: changes[key] = value.bool_param(); break;
      case inference::LogSettingsRequest::SettingValue::kUint32Param: changes[key] = value.uint32_param(); break;
      case inference::LogSettingsRequest::SettingValue::kStringParam: changes[key] = value.string_param(); break;
      default:
        return Done(ctx, absl::InvalidArgumentError(absl::StrCat("settings.", key.substr(0, 64), ": has no value")));
    }
  }
  absl::StatusOr<infergate::LogSettings> now = ChangeLogSettings(changes);
  if (!now.ok()) return Done(ctx, now.status());
  for (const auto& [key, value] : *now) {
    inference::LogSettingsResponse::SettingValue& out = (*response->mutable_settings())[key];
    if (const bool* b = std::get_if<bool>(&value)) out.set_bool_param(*b);
    if (const uint32_t* u = std::get_if<uint32_t>(&value)) out.set_uint32_param(*u);
    if (const std::string* t = std::get_if<std::string>(&value)) out.set_string_param(*t);
  }
  return Done(ctx, absl::OkStatus());
}

}  // namespace infergate
