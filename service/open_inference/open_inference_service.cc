#include "service/open_inference/open_inference_service.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "proto/proto_enums.h"
#include "service/grpc/call_context.h"
#include "service/grpc/guarded_handler.h"
#include "service/open_inference/open_inference_api.h"
#include "service/open_inference/open_inference_codec.h"
#include "service/open_inference/open_inference_extensions.h"
#include "service/grpc/status_convert.h"

namespace infergate {
namespace {

namespace pb = inference;

// Answers `call` with `status` and hands it to gRPC.
grpc::ServerUnaryReactor* Answered(RawUnaryReactor* call, const absl::Status& status) {
  call->Answer(status);
  return call;
}

}  // namespace

OpenInferenceService::OpenInferenceService(InferenceCore& core, const FrontEnd& front_end, std::string server_version)
    : core_(core), front_end_(front_end), api_(core, std::move(server_version)) {}

template <typename Request, typename Response>
grpc::ServerUnaryReactor* OpenInferenceService::ServeWithToken(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in, grpc::ByteBuffer* out,
    absl::FunctionRef<absl::Status(const Request& request, Response* response)> answer) {
  auto* call =
      new RawUnaryCall<Request, Response>(*in, out, CheckToken(front_end_.auth(), *ctx, TokenAuth::Role::kInference));
  if (!call->parsed()) return call;
  return Answered(call, answer(call->request(), call->response()));
}

grpc::ServerUnaryReactor* OpenInferenceService::ServerLive(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in,
                                                           grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "ServerLive", [&]() -> grpc::ServerUnaryReactor* {
    auto* call = new RawUnaryCall<pb::ServerLiveRequest, pb::ServerLiveResponse>(*in, out);
    if (!call->parsed()) return call;
    // Open like the health service, so probes need no token.
    call->response()->set_live(true);
    return Answered(call, absl::OkStatus());
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::ServerReady(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in,
                                                            grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "ServerReady", [&]() -> grpc::ServerUnaryReactor* {
    auto* call = new RawUnaryCall<pb::ServerReadyRequest, pb::ServerReadyResponse>(*in, out);
    if (!call->parsed()) return call;
    call->response()->set_ready(core_.ready() && !front_end_.draining());
    return Answered(call, absl::OkStatus());
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelReady(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in,
                                                           grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "ModelReady", [&]() -> grpc::ServerUnaryReactor* {
    return ServeWithToken<pb::ModelReadyRequest, pb::ModelReadyResponse>(
        ctx, in, out, [&](const auto& request, auto* response) {
          response->set_ready(api_.ModelReady(ModelNameOf(*ctx, request.name()), request.version()) &&
                              !front_end_.draining());
          return absl::OkStatus();
        });
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::ServerMetadata(grpc::CallbackServerContext* ctx,
                                                               const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "ServerMetadata", [&]() -> grpc::ServerUnaryReactor* {
    return ServeWithToken<pb::ServerMetadataRequest, pb::ServerMetadataResponse>(
        ctx, in, out, [&](const auto&, auto* response) {
          api_.ServerMetadata({}, response);
          return absl::OkStatus();
        });
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelMetadata(grpc::CallbackServerContext* ctx,
                                                              const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "ModelMetadata", [&]() -> grpc::ServerUnaryReactor* {
    return ServeWithToken<pb::ModelMetadataRequest, pb::ModelMetadataResponse>(
        ctx, in, out, [&](const auto& request, auto* response) {
          return api_.ModelMetadata(ModelNameOf(*ctx, request.name()), request.version(), response);
        });
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelConfig(grpc::CallbackServerContext* ctx,
                                                            const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "ModelConfig", [&]() -> grpc::ServerUnaryReactor* {
    return ServeWithToken<pb::ModelConfigRequest, pb::ModelConfigResponse>(
        ctx, in, out, [&](const auto& request, auto* response) {
          return api_.ModelConfig(request.name(), request.version(), response);
        });
  });
}

void OpenInferenceService::SubmitModelInfer(InferCall& call, const grpc::ServerContextBase& ctx,
                                            const std::string& model, const inference::ModelInferRequest* request,
                                            inference::ModelInferResponse* response) const {
  InferenceRequest req;
  req.deadline = SteadyDeadline(ctx);
  // Input tensors alias the request's bytes, which live until the call finishes.
  if (absl::Status s = DecodeInferRequest(*request, front_end_.limits(), &req); !s.ok()) return call.Refuse(s);
  req.model = model;
  call.Submit(std::move(req),
              [request, response](InferenceResult& result) { return EncodeInferResponse(*request, result, response); });
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelStatistics(grpc::CallbackServerContext* ctx,
                                                                const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "ModelStatistics", [&]() -> grpc::ServerUnaryReactor* {
    return ServeWithToken<pb::ModelStatisticsRequest, pb::ModelStatisticsResponse>(
        ctx, in, out, [&](const auto& request, auto* response) {
          return api_.ModelStatistics(request.name(), request.version(), response);
        });
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::RepositoryIndex(grpc::CallbackServerContext* ctx,
                                                                const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "RepositoryIndex", [&]() -> grpc::ServerUnaryReactor* {
    return ServeWithToken<pb::RepositoryIndexRequest, pb::RepositoryIndexResponse>(
        ctx, in, out, [&](const auto& request, auto* response) {
          return api_.RepositoryIndex(request.repository_name(), request.ready(), response);
        });
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::RepositoryModelLoad(grpc::CallbackServerContext* ctx,
                                                                    const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "RepositoryModelLoad", [&]() -> grpc::ServerUnaryReactor* {
    auto* call = new RawUnaryCall<pb::RepositoryModelLoadRequest, pb::RepositoryModelLoadResponse>(
        *in, out, CheckToken(front_end_.auth(), *ctx, TokenAuth::Role::kAdmin));
    if (!call->parsed()) return call;
    const pb::RepositoryModelLoadRequest& request = call->request();
    absl::StatusOr<LoadRequest> load =
        LoadRequestFromParameters(request.model_name(), request.parameters(),
                                  /*unload=*/false, front_end_.limits().max_load_file_bytes,
                                  front_end_.limits().allow_native_uploads);
    if (!load.ok()) return Answered(call, LoadFailure(request.model_name(), load.status()));
    // Model files sent with the load are held (and written out) until it ends:
    // they count against the in-flight budget like a request's tensors.
    auto held = std::make_shared<InflightBudget::Reservation>();
    if (front_end_.budget() && load->files) {
      absl::StatusOr<InflightBudget::Reservation> reserved = front_end_.budget()->Reserve(request.ByteSizeLong());
      if (!reserved.ok()) return Answered(call, reserved.status());
      *held = *std::move(reserved);
    }
    core_.LoadModel(*load, [call, held, model = load->model](absl::StatusOr<LoadResult> result) {
      call->Answer(LoadFailure(model, result.status()));
    });
    return call;
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::RepositoryModelUnload(grpc::CallbackServerContext* ctx,
                                                                      const grpc::ByteBuffer* in,
                                                                      grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "RepositoryModelUnload", [&]() -> grpc::ServerUnaryReactor* {
    auto* call = new RawUnaryCall<pb::RepositoryModelUnloadRequest, pb::RepositoryModelUnloadResponse>(
        *in, out, CheckToken(front_end_.auth(), *ctx, TokenAuth::Role::kAdmin));
    if (!call->parsed()) return call;
    absl::StatusOr<LoadRequest> unload =
        LoadRequestFromParameters(call->request().model_name(), call->request().parameters(), /*unload=*/true);
    absl::StatusOr<size_t> n = unload.ok() ? core_.UnloadModel(*unload) : absl::StatusOr<size_t>(unload.status());
    return Answered(call, n.status());
  });
}

// --- The extensions this server answers without serving them as Triton does.

grpc::ServerUnaryReactor* OpenInferenceService::SystemSharedMemoryStatus(grpc::CallbackServerContext* ctx,
                                                                         const grpc::ByteBuffer* in,
                                                                         grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "SystemSharedMemoryStatus", [&]() -> grpc::ServerUnaryReactor* {
    return ServeWithToken<pb::SystemSharedMemoryStatusRequest, pb::SystemSharedMemoryStatusResponse>(
        ctx, in, out, [](const auto& request, auto*) {
          return infergate::SharedMemoryStatus(SharedMemoryKind::kSystem, request.name());
        });
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::SystemSharedMemoryRegister(grpc::CallbackServerContext* ctx,
                                                                           const grpc::ByteBuffer* in,
                                                                           grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "SystemSharedMemoryRegister", [&]() -> grpc::ServerUnaryReactor* {
    return ServeWithToken<pb::SystemSharedMemoryRegisterRequest, pb::SystemSharedMemoryRegisterResponse>(
        ctx, in, out, [](const auto& request, auto*) {
          return infergate::SharedMemoryRegister(SharedMemoryKind::kSystem, request.name());
        });
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::SystemSharedMemoryUnregister(grpc::CallbackServerContext* ctx,
                                                                             const grpc::ByteBuffer* in,
                                                                             grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "SystemSharedMemoryUnregister", [&]() -> grpc::ServerUnaryReactor* {
    return ServeWithToken<pb::SystemSharedMemoryUnregisterRequest, pb::SystemSharedMemoryUnregisterResponse>(
        ctx, in, out, [](const auto& request, auto*) {
          return infergate::SharedMemoryUnregister(SharedMemoryKind::kSystem, request.name());
        });
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::CudaSharedMemoryStatus(grpc::CallbackServerContext* ctx,
                                                                       const grpc::ByteBuffer* in,
                                                                       grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "CudaSharedMemoryStatus", [&]() -> grpc::ServerUnaryReactor* {
    return ServeWithToken<pb::CudaSharedMemoryStatusRequest, pb::CudaSharedMemoryStatusResponse>(
        ctx, in, out, [](const auto& request, auto*) {
          return infergate::SharedMemoryStatus(SharedMemoryKind::kCuda, request.name());
        });
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::CudaSharedMemoryRegister(grpc::CallbackServerContext* ctx,
                                                                         const grpc::ByteBuffer* in,
                                                                         grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "CudaSharedMemoryRegister", [&]() -> grpc::ServerUnaryReactor* {
    return ServeWithToken<pb::CudaSharedMemoryRegisterRequest, pb::CudaSharedMemoryRegisterResponse>(
        ctx, in, out, [](const auto& request, auto*) {
          return infergate::SharedMemoryRegister(SharedMemoryKind::kCuda, request.name());
        });
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::CudaSharedMemoryUnregister(grpc::CallbackServerContext* ctx,
                                                                           const grpc::ByteBuffer* in,
                                                                           grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "CudaSharedMemoryUnregister", [&]() -> grpc::ServerUnaryReactor* {
    return ServeWithToken<pb::CudaSharedMemoryUnregisterRequest, pb::CudaSharedMemoryUnregisterResponse>(
        ctx, in, out, [](const auto& request, auto*) {
          return infergate::SharedMemoryUnregister(SharedMemoryKind::kCuda, request.name());
        });
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::TraceSetting(grpc::CallbackServerContext* ctx,
                                                             const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "TraceSetting", [&]() -> grpc::ServerUnaryReactor* {
    return ServeWithToken<pb::TraceSettingRequest, pb::TraceSettingResponse>(
        ctx, in, out, [](const auto& request, auto*) { return TraceSettingAnswer(request.model_name()); });
  });
}

grpc::ServerUnaryReactor* OpenInferenceService::LogSettings(grpc::CallbackServerContext* ctx,
                                                            const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {
  return GuardedUnary(ctx, "LogSettings", [&]() -> grpc::ServerUnaryReactor* {
    auto* call = new RawUnaryCall<pb::LogSettingsRequest, pb::LogSettingsResponse>(*in, out);
    if (!call->parsed()) return call;
    const pb::LogSettingsRequest& request = call->request();
    // Reading needs the inference token; changing the server's logging, the
    // admin one: which one, only the parsed request says.
    const bool change = request.settings_size() > 0;
    absl::Status s = CheckToken(front_end_.auth(), *ctx, change ? TokenAuth::Role::kAdmin : TokenAuth::Role::kInference);
    if (!s.ok()) return Answered(call, s);
    infergate::LogSettings changes;
    for (const auto& [key, value] : request.settings()) {
      switch (value.parameter_choice_case()) {
        case pb::LogSettingsRequest::SettingValue::kBoolParam:
          changes[key] = value.bool_param();
          break;
        case pb::LogSettingsRequest::SettingValue::kUint32Param:
          changes[key] = value.uint32_param();
          break;
        case pb::LogSettingsRequest::SettingValue::kStringParam:
          changes[key] = value.string_param();
          break;
        default:
          return Answered(call,
                          absl::InvalidArgumentError(absl::StrCat("settings.", key.substr(0, 64), ": has no value")));
      }
    }
    absl::StatusOr<infergate::LogSettings> now = ChangeLogSettings(changes);
    if (!now.ok()) return Answered(call, now.status());
    for (const auto& [key, value] : *now) {
      pb::LogSettingsResponse::SettingValue& setting = (*call->response()->mutable_settings())[key];
      if (const bool* b = std::get_if<bool>(&value)) setting.set_bool_param(*b);
      if (const uint32_t* u = std::get_if<uint32_t>(&value)) setting.set_uint32_param(*u);
      if (const std::string* t = std::get_if<std::string>(&value)) setting.set_string_param(*t);
    }
    return Answered(call, absl::OkStatus());
  });
}

}  // namespace infergate
