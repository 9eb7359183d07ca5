#include "service/open_inference_service.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/proto_enums.h"
#include "service/call_context.h"
#include "service/open_inference_codec.h"
#include "service/open_inference_stream.h"
#include "service/status_convert.h"

namespace infergate {
namespace {

constexpr char kPlatform[] = "pytorch_libtorch";

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// The model's declared datatype for a config tensor; "" when it declares none.
std::string DeclaredDatatype(int wire) {
  std::optional<DType> dtype = DTypeFromProto(wire);
  return dtype ? std::string(DatatypeName(*dtype)) : std::string();
}

void FillTensorMetadata(const v1::TensorSpec& spec, bool batched,
                        inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(spec.name());
  out->set_datatype(DeclaredDatatype(spec.dtype()));
  if (batched) out->add_shape(-1);
  for (int64_t d : spec.dims()) out->add_shape(d);
}

// A repository parameter as text (string or integer), "" when absent.
absl::StatusOr<std::string> RepositoryParameter(
    const google::protobuf::Map<std::string, inference::ModelRepositoryParameter>& params, const std::string& key) {
  auto it = params.find(key);
  if (it == params.end()) return std::string();
  switch (it->second.parameter_choice_case()) {
    case inference::ModelRepositoryParameter::kStringParam: return it->second.string_param();
    case inference::ModelRepositoryParameter::kInt64Param: return absl::StrCat(it->second.int64_param());
    default: return absl::InvalidArgumentError(absl::StrCat("parameters.", key, ": expected a string"));
  }
}

absl::StatusOr<Precision> PrecisionParameter(const std::string& text) {
  if (text.empty() || text == "AUTO") return Precision::kAuto;
  if (text == "FP32") return Precision::kFp32;
  if (text == "FP16") return Precision::kFp16;
  if (text == "BF16") return Precision::kBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("parameters.precision: '", text.substr(0, 32), "'; expected AUTO, FP32, FP16 or BF16"));
}

absl::StatusOr<LoadRequest> LoadRequestFrom(
    const std::string& model, const google::protobuf::Map<std::string, inference::ModelRepositoryParameter>& params) {
  LoadRequest load;
  load.model = model;
  for (const char* key : {"version", "device", "precision"}) {
    absl::StatusOr<std::string> value = RepositoryParameter(params, key);
    if (!value.ok()) return value.status();
    if (std::string(key) == "version") load.version = *value;
    if (std::string(key) == "device") load.device = *value;
    if (std::string(key) == "precision") {
      absl::StatusOr<Precision> p = PrecisionParameter(*value);
      if (!p.ok()) return p.status();
      load.precision = *p;
    }
  }
  return load;
}

void FillDuration(const DurationStat& from, inference::StatisticDuration* to) {
  to->set_count(from.count);
  to->set_ns(from.ns);
}

}  // namespace

OpenInferenceService::OpenInferenceService(InferenceCore& core, CodecLimits limits, Metrics* metrics, TokenAuth auth,
                                           std::string server_version, InflightBudget* budget)
    : core_(core),
      limits_(limits),
      metrics_(metrics),
      auth_(std::move(auth)),
      server_version_(std::move(server_version)),
      budget_(budget) {}

absl::StatusOr<ModelStatus> OpenInferenceService::AuthorizedModel(const grpc::CallbackServerContext& ctx,
                                                                  const std::string& name,
                                                                  const std::string& version) {
  if (absl::Status s = auth_.Check(Authorization(ctx), TokenAuth::Role::kInference); !s.ok()) return s;
  return core_.Model(name, version);
}

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
  absl::StatusOr<ModelStatus> model = core_.Model(request->name(), request->version());
  // An unknown model is not an error here: it is simply not ready.
  response->set_ready(model.ok() && model->problem.ok() && !model->versions.empty() && !draining_.load());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* OpenInferenceService::ServerMetadata(grpc::CallbackServerContext* ctx,
                                                               const inference::ServerMetadataRequest*,
                                                               inference::ServerMetadataResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (Refused(auth_, *ctx, TokenAuth::Role::kInference, reactor)) return reactor;
  response->set_name("infergate");
  response->set_version(server_version_);
  // Only what is implemented: clients switch features on from this list.
  for (const char* extension : {"model_repository", "model_configuration", "statistics", "parameters"}) {
    response->add_extensions(extension);
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelMetadata(grpc::CallbackServerContext* ctx,
                                                              const inference::ModelMetadataRequest* request,
                                                              inference::ModelMetadataResponse* response) {
  absl::StatusOr<ModelStatus> model = AuthorizedModel(*ctx, request->name(), request->version());
  if (!model.ok()) return Done(ctx, model.status());
  response->set_name(model->name);
  if (request->version().empty()) {
    for (int64_t v : model->versions) response->add_versions(absl::StrCat(v));
  } else {
    response->add_versions(request->version());
  }
  response->set_platform(kPlatform);
  const bool batched = model->config.max_batch_size() > 0;
  for (const v1::TensorSpec& in : model->config.inputs()) FillTensorMetadata(in, batched, response->add_inputs());
  for (const v1::TensorSpec& out : model->config.outputs()) FillTensorMetadata(out, batched, response->add_outputs());
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelConfig(grpc::CallbackServerContext* ctx,
                                                            const inference::ModelConfigRequest* request,
                                                            inference::ModelConfigResponse* response) {
  absl::StatusOr<ModelStatus> model = AuthorizedModel(*ctx, request->name(), request->version());
  if (!model.ok()) return Done(ctx, model.status());
  const v1::ModelConfig& from = model->config;
  inference::ModelConfig* config = response->mutable_config();
  config->set_name(model->name);
  config->set_platform(kPlatform);
  config->set_backend("pytorch");
  config->set_max_batch_size(static_cast<int32_t>(from.max_batch_size()));
  for (const v1::TensorSpec& s : from.inputs()) {
    inference::ModelInput* in = config->add_input();
    in->set_name(s.name());
    if (std::optional<DType> d = DTypeFromProto(s.dtype())) in->set_data_type(ConfigDatatype(*d));
    for (int64_t d : s.dims()) in->add_dims(d);
  }
  for (const v1::TensorSpec& s : from.outputs()) {
    inference::ModelOutput* out = config->add_output();
    out->set_name(s.name());
    if (std::optional<DType> d = DTypeFromProto(s.dtype())) out->set_data_type(ConfigDatatype(*d));
    for (int64_t d : s.dims()) out->add_dims(d);
  }
  if (from.max_batch_size() > 0) {
    inference::ModelDynamicBatching* batching = config->mutable_dynamic_batching();
    batching->set_max_queue_delay_microseconds(from.dynamic_batching().max_queue_delay_us());
    for (uint32_t size : from.dynamic_batching().preferred_batch_sizes()) {
      batching->add_preferred_batch_size(static_cast<int32_t>(size));
    }
  }
  // One instance group per device kind the model may run on here, sized by
  // the workers serving it.
  int cpu_workers = 0;
  std::vector<int32_t> gpus;
  for (const DeviceStatus& d : core_.Devices()) {
    if (!d.info.available || !model->AllowsDevice(d.info.id.kind)) continue;
    if (d.info.id.kind == DeviceKind::kCpu) cpu_workers += d.workers;
    if (d.info.id.kind == DeviceKind::kCuda) gpus.push_back(d.info.id.index);
  }
  if (!gpus.empty()) {
    inference::ModelInstanceGroup* group = config->add_instance_group();
    group->set_name(absl::StrCat(model->name, "_gpu"));
    group->set_kind(inference::ModelInstanceGroup::KIND_GPU);
    group->set_count(1);
    for (int32_t g : gpus) group->add_gpus(g);
  }
  if (cpu_workers > 0) {
    inference::ModelInstanceGroup* group = config->add_instance_group();
    group->set_name(absl::StrCat(model->name, "_cpu"));
    group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
    group->set_count(cpu_workers);
  }
  return Done(ctx, absl::OkStatus());
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
  absl::Status refusal = auth_.Check(Authorization(*ctx), TokenAuth::Role::kInference);
  return new InferStreamReactor(core_, limits_, metrics_, budget_, draining_, SteadyDeadline(*ctx), refusal);
}

grpc::ServerUnaryReactor* OpenInferenceService::ModelStatistics(grpc::CallbackServerContext* ctx,
                                                                const inference::ModelStatisticsRequest* request,
                                                                inference::ModelStatisticsResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (Refused(auth_, *ctx, TokenAuth::Role::kInference, reactor)) return reactor;
  absl::StatusOr<std::vector<ModelStats>> stats = core_.Statistics(request->name(), request->version());
  if (!stats.ok()) {
    reactor->Finish(ToGrpcStatus(stats.status()));
    return reactor;
  }
  for (const ModelStats& s : *stats) {
    inference::ModelStatistics* out = response->add_model_stats();
    out->set_name(s.model);
    out->set_version(absl::StrCat(s.version));
    out->set_last_inference(s.last_inference_ms);
    out->set_inference_count(s.inference_count);
    out->set_execution_count(s.execution_count);
    inference::InferStatistics* infer = out->mutable_inference_stats();
    FillDuration(s.success, infer->mutable_success());
    FillDuration(s.fail, infer->mutable_fail());
    FillDuration(s.queue, infer->mutable_queue());
    FillDuration(s.compute_input, infer->mutable_compute_input());
    FillDuration(s.compute_infer, infer->mutable_compute_infer());
    FillDuration(s.compute_output, infer->mutable_compute_output());
    for (const auto& [size, batch] : s.batches) {
      inference::InferBatchStatistics* b = out->add_batch_stats();
      b->set_batch_size(size);
      FillDuration(batch.compute_input, b->mutable_compute_input());
      FillDuration(batch.compute_infer, b->mutable_compute_infer());
      FillDuration(batch.compute_output, b->mutable_compute_output());
    }
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* OpenInferenceService::RepositoryIndex(grpc::CallbackServerContext* ctx,
                                                                const inference::RepositoryIndexRequest* request,
                                                                inference::RepositoryIndexResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (Refused(auth_, *ctx, TokenAuth::Role::kInference, reactor)) return reactor;
  if (!request->repository_name().empty()) {
    reactor->Finish(ToGrpcStatus(absl::NotFoundError(absl::StrCat(
        "repository_name: '", request->repository_name().substr(0, 64), "' is not a repository; leave it empty"))));
    return reactor;
  }
  absl::StatusOr<std::vector<ModelStatus>> models = core_.Models();
  if (!models.ok()) {
    reactor->Finish(ToGrpcStatus(models.status()));
    return reactor;
  }
  for (const ModelStatus& m : *models) {
    const bool ready = m.problem.ok() && !m.versions.empty();
    if (request->ready() && !ready) continue;
    auto add = [&](const std::string& version) {
      inference::RepositoryIndexResponse::ModelIndex* index = response->add_models();
      index->set_name(m.name);
      index->set_version(version);
      index->set_state(ready ? "READY" : "UNAVAILABLE");
      if (!m.problem.ok()) {
        index->set_reason(std::string(m.problem.message()));
      } else if (m.versions.empty()) {
        index->set_reason("no version folder holds a model.pt");
      }
    };
    if (m.versions.empty()) add("");
    for (int64_t v : m.versions) add(absl::StrCat(v));
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* OpenInferenceService::RepositoryModelLoad(
    grpc::CallbackServerContext* ctx, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse*) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (Refused(auth_, *ctx, TokenAuth::Role::kAdmin, reactor)) return reactor;
  absl::StatusOr<LoadRequest> load = LoadRequestFrom(request->model_name(), request->parameters());
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
  absl::StatusOr<LoadRequest> unload = LoadRequestFrom(request->model_name(), request->parameters());
  absl::StatusOr<size_t> n = unload.ok() ? core_.UnloadModel(*unload) : absl::StatusOr<size_t>(unload.status());
  reactor->Finish(ToGrpcStatus(n.status()));
  return reactor;
}

}  // namespace infergate
