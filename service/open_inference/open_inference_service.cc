#include "service/open_inference/open_inference_service.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "proto/proto_enums.h"
#include "service/grpc/call_context.h"
#include "service/grpc/message_bytes.h"
#include "service/grpc/model_infer_answer_bytes.h"
#include "service/grpc/status_convert.h"
#include "service/open_inference/open_inference_api.h"
#include "service/open_inference/open_inference_codec.h"
#include "service/open_inference/open_inference_extensions.h"
#include "service/open_inference/open_inference_stream.h"
#include "service/tracing/trace_settings.h"

namespace infergate {
namespace {

namespace pb = inference;

// What a load's request takes beside the files it may carry: its config
// and other parameters.
constexpr uint64_t kLoadConfigBytes = 1 << 20;

// Answers `call` with `status`.
template <typename Call>
void Answered(Call* call, const absl::Status& status) {
  call->Answer(status);
}

}  // namespace

OpenInferenceService::OpenInferenceService(InferenceCore& core, const CallEnvironment& environment,
                                           std::string server_version)
    : core_(core), environment_(environment), api_(core, std::move(server_version)) {}

template <typename Request, typename Response>
void OpenInferenceService::Serve(GrpcServerCall& server_call,
                                 absl::FunctionRef<absl::Status(const Request& request, Response* response)> answer) {
  auto* call = RawUnaryCall<Request, Response>::Start(server_call);
  if (call == nullptr) return;
  call->Answer(answer(call->request(), call->response()));
}

namespace {

// A ModelStreamInfer stream as the completion-queue server carries it: an
// InferStream (open_inference_stream.h) over the server's transport. Each
// answer is serialised here; one over protobuf's 2 GB limit goes as an
// in-band error in its place. Threading and lifetime as InferStream's; the
// server owns the session and outlives its transport's last use.
class ModelStreamInferSession final : public InferStreamSession, private InferStream::Transport {
 public:
  ModelStreamInferSession(InferStreamTransport& transport, const CallEnvironment& environment,
                          const grpc::ServerContextBase& ctx)
      : transport_(transport), stream_(*this, environment, ctx) {}

  void Start(const absl::Status& refusal) override { stream_.Start(refusal); }
  void OnReadDone(bool ok, uint64_t held_bytes) override { stream_.OnReadDone(ok, held_bytes); }
  void OnUnreadableRequest(const absl::Status& why) override { stream_.OnUnreadableRequest(why); }
  void OnWriteDone(bool ok) override { stream_.OnWriteDone(ok); }
  void OnCancel() override { stream_.OnCancel(); }

 private:
  void StartRead(inference::ModelInferRequest* request) override { transport_.StartRead(request); }
  void StartWrite(const inference::ModelStreamInferResponse* response, grpc::WriteOptions options) override {
    grpc::ByteBuffer bytes;
    if (absl::Status serialized = SerializeAnswerBytes(*response, &bytes); !serialized.ok()) {
      const inference::ModelInferResponse& answered = response->infer_response();
      (void)SerializeAnswerBytes(
          InBandError(answered.model_name(), answered.model_version(), answered.id(), serialized), &bytes);
    }
    transport_.StartWrite(bytes, options);
  }
  void Finish(const grpc::Status& status) override { transport_.Finish(status); }

  InferStreamTransport& transport_;
  InferStream stream_;
};

}  // namespace

void OpenInferenceService::Register(GrpcMethods& methods, GrpcInferCalls& infer_calls) {
  UnaryInferMethod<inference::ModelInferRequest, inference::ModelInferResponse> infer;
  infer.rpc = &kModelInferRpc;
  infer.model = [](const inference::ModelInferRequest& request) -> const std::string& { return request.model_name(); };
  infer.submit = [this](InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                        const inference::ModelInferRequest& request, inference::ModelInferResponse* response) {
    SubmitModelInfer(call, ctx, model, &request, response);
  };
  // The outputs' bytes move into the answer's slices, uncopied.
  infer.serialize = [](inference::ModelInferResponse& response, grpc::ByteBuffer* out) {
    return SerializeModelInferAnswer(response, out);
  };
  infer_calls.AddUnary(std::move(infer));
  InferStreamMethod stream;
  stream.rpc = &kModelStreamInferRpc;
  stream.post = [this](grpc::ServerContext* ctx, grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* rw,
                       grpc::ServerCompletionQueue* queue,
                       void* tag) { RequestModelStreamInfer(ctx, rw, queue, queue, tag); };
  stream.open = [this](InferStreamTransport& transport,
                       const grpc::ServerContextBase& ctx) -> std::unique_ptr<InferStreamSession> {
    return std::make_unique<ModelStreamInferSession>(transport, environment_, ctx);
  };
  infer_calls.SetStream(std::move(stream));

  constexpr absl::string_view kService = "inference.GRPCInferenceService";
  using Role = TokenAuth::Role;
  auto add = [&](absl::string_view name, std::optional<Role> role, uint64_t max_bytes,
                 const google::protobuf::Descriptor* type, void (OpenInferenceService::*serve)(GrpcServerCall&)) {
    AddUnaryMethod(methods, kService, name, role, max_bytes, type, this, serve);
  };
  const uint64_t small = kSmallRequestBytes;
  // Probes need no token, like the health service.
  add("ServerLive", std::nullopt, small, pb::ServerLiveRequest::descriptor(), &OpenInferenceService::HandleServerLive);
  add("ServerReady", std::nullopt, small, pb::ServerReadyRequest::descriptor(),
      &OpenInferenceService::HandleServerReady);
  add("ModelReady", Role::kInference, small, pb::ModelReadyRequest::descriptor(),
      &OpenInferenceService::HandleModelReady);
  add("ServerMetadata", Role::kInference, small, pb::ServerMetadataRequest::descriptor(),
      &OpenInferenceService::HandleServerMetadata);
  add("ModelMetadata", Role::kInference, small, pb::ModelMetadataRequest::descriptor(),
      &OpenInferenceService::HandleModelMetadata);
  add("ModelConfig", Role::kInference, small, pb::ModelConfigRequest::descriptor(),
      &OpenInferenceService::HandleModelConfig);
  add("ModelStatistics", Role::kInference, small, pb::ModelStatisticsRequest::descriptor(),
      &OpenInferenceService::HandleModelStatistics);
  add("RepositoryIndex", Role::kInference, small, pb::RepositoryIndexRequest::descriptor(),
      &OpenInferenceService::HandleRepositoryIndex);
  // A load may carry a config and the model's files.
  add("RepositoryModelLoad", Role::kAdmin, environment_.limits().max_load_file_bytes + kLoadConfigBytes,
      pb::RepositoryModelLoadRequest::descriptor(), &OpenInferenceService::HandleRepositoryModelLoad);
  add("RepositoryModelUnload", Role::kAdmin, small, pb::RepositoryModelUnloadRequest::descriptor(),
      &OpenInferenceService::HandleRepositoryModelUnload);
  add("SystemSharedMemoryStatus", Role::kInference, small, pb::SystemSharedMemoryStatusRequest::descriptor(),
      &OpenInferenceService::HandleSystemSharedMemoryStatus);
  add("SystemSharedMemoryRegister", Role::kInference, small, pb::SystemSharedMemoryRegisterRequest::descriptor(),
      &OpenInferenceService::HandleSystemSharedMemoryRegister);
  add("SystemSharedMemoryUnregister", Role::kInference, small, pb::SystemSharedMemoryUnregisterRequest::descriptor(),
      &OpenInferenceService::HandleSystemSharedMemoryUnregister);
  add("CudaSharedMemoryStatus", Role::kInference, small, pb::CudaSharedMemoryStatusRequest::descriptor(),
      &OpenInferenceService::HandleCudaSharedMemoryStatus);
  add("CudaSharedMemoryRegister", Role::kInference, small, pb::CudaSharedMemoryRegisterRequest::descriptor(),
      &OpenInferenceService::HandleCudaSharedMemoryRegister);
  add("CudaSharedMemoryUnregister", Role::kInference, small, pb::CudaSharedMemoryUnregisterRequest::descriptor(),
      &OpenInferenceService::HandleCudaSharedMemoryUnregister);
  add("TraceSetting", Role::kInference, small, pb::TraceSettingRequest::descriptor(),
      &OpenInferenceService::HandleTraceSetting);
  // Reading the settings needs the inference token, changing them the
  // admin one (checked once the request says which).
  add("LogSettings", Role::kInference, small, pb::LogSettingsRequest::descriptor(),
      &OpenInferenceService::HandleLogSettings);
}

void OpenInferenceService::HandleServerLive(GrpcServerCall& server_call) {
  auto* call = RawUnaryCall<pb::ServerLiveRequest, pb::ServerLiveResponse>::Start(server_call);
  if (call == nullptr) return;
  // Open like the health service, so probes need no token.
  call->response()->set_live(true);
  return Answered(call, absl::OkStatus());
}

void OpenInferenceService::HandleServerReady(GrpcServerCall& server_call) {
  auto* call = RawUnaryCall<pb::ServerReadyRequest, pb::ServerReadyResponse>::Start(server_call);
  if (call == nullptr) return;
  call->response()->set_ready(core_.ready() && !environment_.draining());
  return Answered(call, absl::OkStatus());
}

void OpenInferenceService::HandleModelReady(GrpcServerCall& server_call) {
  return Serve<pb::ModelReadyRequest, pb::ModelReadyResponse>(server_call, [&](const auto& request, auto* response) {
    response->set_ready(api_.ModelReady(ModelNameOf(server_call.context(), request.name()), request.version()) &&
                        !environment_.draining());
    return absl::OkStatus();
  });
}

void OpenInferenceService::HandleServerMetadata(GrpcServerCall& server_call) {
  return Serve<pb::ServerMetadataRequest, pb::ServerMetadataResponse>(server_call, [&](const auto&, auto* response) {
    api_.ServerMetadata({}, response);
    return absl::OkStatus();
  });
}

void OpenInferenceService::HandleModelMetadata(GrpcServerCall& server_call) {
  return Serve<pb::ModelMetadataRequest, pb::ModelMetadataResponse>(
      server_call, [&](const auto& request, auto* response) {
        return api_.ModelMetadata(ModelNameOf(server_call.context(), request.name()), request.version(), response);
      });
}

void OpenInferenceService::HandleModelConfig(GrpcServerCall& server_call) {
  return Serve<pb::ModelConfigRequest, pb::ModelConfigResponse>(server_call, [&](const auto& request, auto* response) {
    return api_.ModelConfig(request.name(), request.version(), response);
  });
}

void OpenInferenceService::SubmitModelInfer(InferCall& call, const grpc::ServerContextBase& ctx,
                                            const std::string& model, const inference::ModelInferRequest* request,
                                            inference::ModelInferResponse* response) const {
  InferenceRequest req;
  req.deadline = SteadyDeadline(ctx);
  // Input tensors alias the request's bytes, which live until the call finishes.
  if (absl::Status s = DecodeInferRequest(*request, environment_.limits(), &req); !s.ok()) return call.Refuse(s);
  req.model = model;
  call.ExpectClasses(MaxClassCount(*request));
  call.Submit(std::move(req),
              [request, response](InferenceResult& result) { return EncodeInferResponse(*request, result, response); });
}

void OpenInferenceService::HandleModelStatistics(GrpcServerCall& server_call) {
  return Serve<pb::ModelStatisticsRequest, pb::ModelStatisticsResponse>(
      server_call, [&](const auto& request, auto* response) {
        return api_.ModelStatistics(request.name(), request.version(), response);
      });
}

void OpenInferenceService::HandleRepositoryIndex(GrpcServerCall& server_call) {
  return Serve<pb::RepositoryIndexRequest, pb::RepositoryIndexResponse>(
      server_call, [&](const auto& request, auto* response) {
        return api_.RepositoryIndex(request.repository_name(), request.ready(), response);
      });
}

void OpenInferenceService::HandleRepositoryModelLoad(GrpcServerCall& server_call) {
  auto* call = RawUnaryCall<pb::RepositoryModelLoadRequest, pb::RepositoryModelLoadResponse>::Start(server_call);
  if (call == nullptr) return;
  const pb::RepositoryModelLoadRequest& request = call->request();
  absl::StatusOr<LoadRequest> load = LoadRequestFromParameters(
      request.model_name(), request.parameters(),
      /*unload=*/false, environment_.limits().max_load_file_bytes, environment_.limits().allow_native_uploads);
  if (!load.ok()) return Answered(call, LoadFailure(request.model_name(), load.status()));
  // Model files sent with the load are held (and written out) until it
  // ends: the call's share of the in-flight budget (its message, charged
  // before it was read) stays until it is answered.
  core_.LoadModel(*load, [call, model = load->model](absl::StatusOr<LoadResult> result) {
    call->Answer(LoadFailure(model, result.status()));
  });
}

void OpenInferenceService::HandleRepositoryModelUnload(GrpcServerCall& server_call) {
  auto* call = RawUnaryCall<pb::RepositoryModelUnloadRequest, pb::RepositoryModelUnloadResponse>::Start(server_call);
  if (call == nullptr) return;
  absl::StatusOr<LoadRequest> unload =
      LoadRequestFromParameters(call->request().model_name(), call->request().parameters(), /*unload=*/true);
  absl::StatusOr<size_t> n = unload.ok() ? core_.UnloadModel(*unload) : absl::StatusOr<size_t>(unload.status());
  return Answered(call, n.status());
}

// --- The extensions this server answers without serving them as Triton does.

void OpenInferenceService::HandleSystemSharedMemoryStatus(GrpcServerCall& server_call) {
  return Serve<pb::SystemSharedMemoryStatusRequest, pb::SystemSharedMemoryStatusResponse>(
      server_call, [](const auto& request, auto*) {
        return infergate::SharedMemoryStatus(SharedMemoryKind::kSystem, request.name());
      });
}

void OpenInferenceService::HandleSystemSharedMemoryRegister(GrpcServerCall& server_call) {
  return Serve<pb::SystemSharedMemoryRegisterRequest, pb::SystemSharedMemoryRegisterResponse>(
      server_call, [](const auto& request, auto*) {
        return infergate::SharedMemoryRegister(SharedMemoryKind::kSystem, request.name());
      });
}

void OpenInferenceService::HandleSystemSharedMemoryUnregister(GrpcServerCall& server_call) {
  return Serve<pb::SystemSharedMemoryUnregisterRequest, pb::SystemSharedMemoryUnregisterResponse>(
      server_call, [](const auto& request, auto*) {
        return infergate::SharedMemoryUnregister(SharedMemoryKind::kSystem, request.name());
      });
}

void OpenInferenceService::HandleCudaSharedMemoryStatus(GrpcServerCall& server_call) {
  return Serve<pb::CudaSharedMemoryStatusRequest, pb::CudaSharedMemoryStatusResponse>(
      server_call, [](const auto& request, auto*) {
        return infergate::SharedMemoryStatus(SharedMemoryKind::kCuda, request.name());
      });
}

void OpenInferenceService::HandleCudaSharedMemoryRegister(GrpcServerCall& server_call) {
  return Serve<pb::CudaSharedMemoryRegisterRequest, pb::CudaSharedMemoryRegisterResponse>(
      server_call, [](const auto& request, auto*) {
        return infergate::SharedMemoryRegister(SharedMemoryKind::kCuda, request.name());
      });
}

void OpenInferenceService::HandleCudaSharedMemoryUnregister(GrpcServerCall& server_call) {
  return Serve<pb::CudaSharedMemoryUnregisterRequest, pb::CudaSharedMemoryUnregisterResponse>(
      server_call, [](const auto& request, auto*) {
        return infergate::SharedMemoryUnregister(SharedMemoryKind::kCuda, request.name());
      });
}

void OpenInferenceService::HandleTraceSetting(GrpcServerCall& server_call) {
  auto* call = RawUnaryCall<pb::TraceSettingRequest, pb::TraceSettingResponse>::Start(server_call);
  if (call == nullptr) return;
  const pb::TraceSettingRequest& request = call->request();
  // Reading needs the inference token; a change, the admin one.
  const bool change = request.settings_size() > 0;
  absl::Status s = CheckToken(environment_.auth(), server_call.context(),
                              change ? TokenAuth::Role::kAdmin : TokenAuth::Role::kInference);
  if (!s.ok()) return Answered(call, s);
  TraceSettings* settings = environment_.trace_settings();
  const std::string model = ModelNameOf(server_call.context(), request.model_name());
  if (absl::Status target = api_.CheckTraceSettingTarget(settings, model); !target.ok()) return Answered(call, target);
  // As Triton's gRPC front end: a setting with no values clears a model's own.
  TraceSettings::Change changes;
  for (const auto& [key, value] : request.settings()) {
    changes[key] = value.value().empty() ? std::nullopt
                                         : std::optional<std::vector<std::string>>(
                                               std::vector<std::string>(value.value().begin(), value.value().end()));
  }
  absl::StatusOr<TraceSettings::Values> now = change ? settings->Update(model, changes) : settings->Get(model);
  if (!now.ok()) return Answered(call, now.status());
  for (const auto& [key, values] : *now) {
    auto& out = (*call->response()->mutable_settings())[key];
    for (const std::string& v : values) out.add_value(v);
  }
  return Answered(call, absl::OkStatus());
}

void OpenInferenceService::HandleLogSettings(GrpcServerCall& server_call) {
  auto* call = RawUnaryCall<pb::LogSettingsRequest, pb::LogSettingsResponse>::Start(server_call);
  if (call == nullptr) return;
  const pb::LogSettingsRequest& request = call->request();
  // Reading needs the inference token; changing the server's logging, the
  // admin one: which one, only the parsed request says.
  const bool change = request.settings_size() > 0;
  absl::Status s = CheckToken(environment_.auth(), server_call.context(),
                              change ? TokenAuth::Role::kAdmin : TokenAuth::Role::kInference);
  if (!s.ok()) return Answered(call, s);
  infergate::LogSettings changes;
  for (const auto& [key, value] : request.settings()) {
    switch (value.parameter_choice_case()) {
      case pb::LogSettingsRequest::SettingValue::kBoolParam: changes[key] = value.bool_param(); break;
      case pb::LogSettingsRequest::SettingValue::kUint32Param: changes[key] = value.uint32_param(); break;
      case pb::LogSettingsRequest::SettingValue::kStringParam: changes[key] = value.string_param(); break;
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
}

}  // namespace infergate
