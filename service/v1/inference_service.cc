#include "service/v1/inference_service.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/client_text.h"
#include "common/status_macros.h"
#include "proto/proto_enums.h"
#include "scheduler/repository/class_labels.h"
#include "service/call/classification.h"
#include "service/call/tensor_codec.h"
#include "service/grpc/call_context.h"
#include "service/grpc/message_bytes.h"
#include "service/grpc/raw_unary_call.h"
#include "service/grpc/status_convert.h"
#include "service/v1/v1_request_check.h"

namespace infergate {
namespace {

// The top `k` classes of `out`, as infergate.v1 answers them (classification.h).
absl::Status EncodeClasses(const NamedTensor& out, const InferenceResult& result, uint32_t k,
                           v1::ClassifiedOutput* wire) {
  ASSIGN_OR_RETURN(std::vector<std::vector<ClassScore>> rows,
                   TopClasses(out.tensor, result.batched, k, result.labels ? result.labels->For(out.name) : nullptr,
                              absl::StrCat("class_count (output '", out.name, "')")));
  wire->set_name(out.name);
  for (const std::vector<ClassScore>& row : rows) {
    v1::ClassRow* r = wire->add_rows();
    for (const ClassScore& c : row) {
      v1::ClassScore* score = r->add_classes();
      score->set_index(c.index);
      score->set_score(c.score);
      score->set_label(c.label);
    }
  }
  return absl::OkStatus();
}

v1::DeviceKind KindToWire(DeviceKind k) {
  switch (k) {
    case DeviceKind::kCpu: return v1::CPU;
    case DeviceKind::kCuda: return v1::CUDA;
    case DeviceKind::kMps: return v1::MPS;
  }
  return v1::DEVICE_KIND_UNSPECIFIED;
}

void FillLoaded(const ModelKey& key, v1::LoadedModel* out) {
  out->set_version(key.version);
  out->set_device(key.device.ToString());
  out->set_dtype(DTypeToProto(key.dtype));
  out->set_state("resident");
}

// A copy on its way to `device`, or one demoted from it: the latest version's.
void FillPlacement(const ModelStatus& model, const DeviceId& device, const char* state, v1::LoadedModel* out) {
  if (!model.versions.empty()) out->set_version(model.versions.back());
  out->set_device(device.ToString());
  out->set_state(state);
}

}  // namespace

InferenceServiceImpl::InferenceServiceImpl(InferenceCore& core, const CallEnvironment& environment)
    : core_(core), environment_(environment) {}

void InferenceServiceImpl::Register(GrpcMethods& methods, GrpcInferCalls& infer_calls) {
  UnaryInferMethod<v1::InferRequest, v1::InferResponse> infer;
  infer.rpc = &kV1InferRpc;
  infer.model = [](const v1::InferRequest& request) -> const std::string& { return request.model(); };
  infer.submit = [this](InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                        const v1::InferRequest& request,
                        v1::InferResponse* response) { SubmitInfer(call, ctx, model, &request, response); };
  infer.serialize = [](v1::InferResponse& response, grpc::ByteBuffer* out) {
    return SerializeAnswerBytes(response, out);
  };
  infer_calls.AddUnary(std::move(infer));

  constexpr absl::string_view kService = "infergate.v1.InferenceService";
  auto add = [&](absl::string_view name, TokenAuth::Role role, uint64_t max_bytes,
                 const google::protobuf::Descriptor* type, void (InferenceServiceImpl::*serve)(GrpcServerCall&)) {
    AddUnaryMethod(methods, kService, name, role, max_bytes, type, this, serve);
  };
  add("ListDevices", TokenAuth::Role::kInference, kSmallRequestBytes, v1::ListDevicesRequest::descriptor(),
      &InferenceServiceImpl::ListDevices);
  add("ListModels", TokenAuth::Role::kInference, kSmallRequestBytes, v1::ListModelsRequest::descriptor(),
      &InferenceServiceImpl::ListModels);
  add("LoadModel", TokenAuth::Role::kAdmin, kSmallRequestBytes, v1::LoadModelRequest::descriptor(),
      &InferenceServiceImpl::LoadModel);
  add("UnloadModel", TokenAuth::Role::kAdmin, kSmallRequestBytes, v1::UnloadModelRequest::descriptor(),
      &InferenceServiceImpl::UnloadModel);
}

void InferenceServiceImpl::SubmitInfer(InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                                       const v1::InferRequest* request, v1::InferResponse* response) const {
  absl::StatusOr<CheckedInferRequest> checked = CheckInferRequest(*request, environment_.limits());
  if (!checked.ok()) return call.Refuse(checked.status());
  InferenceRequest req;
  req.deadline = SteadyDeadline(ctx);
  req.model = model;
  req.version = request->version();
  req.device = request->device();
  req.precision = checked->precision;
  req.allow_fallback = checked->allow_fallback;
  req.priority = request->priority();
  req.timeout_us = request->timeout_us();
  req.inputs.reserve(request->inputs_size());
  for (int i = 0; i < request->inputs_size(); ++i) {
    const v1::Tensor& wire = request->inputs(i);
    const WireTensorInfo& info = checked->inputs[static_cast<size_t>(i)];
    // Aliases the request's bytes, which live until the call finishes.
    req.inputs.push_back({wire.name(), TensorOverBytes(info.dtype, info.shape, wire.data())});
  }
  if (request->class_count() > 0) call.ExpectClasses(request->class_count());
  call.Submit(std::move(req), [request, response, received = call.received()](InferenceResult& result) {
    for (const NamedTensor& out : result.outputs) {
      absl::Status s = request->class_count() > 0
                           ? EncodeClasses(out, result, request->class_count(), response->add_classifications())
                           : EncodeTensor(out.tensor, out.name, response->add_outputs());
      if (!s.ok()) return s;
    }
    const Placement& p = result.placement;
    v1::Placement* placement = response->mutable_placement();
    placement->set_device(p.device);
    placement->set_requested_device(p.requested_device);
    placement->set_dtype(DTypeToProto(p.dtype));
    placement->set_fell_back(p.fell_back);
    placement->set_fallback_reason(p.fallback_reason);
    placement->set_precision_reason(p.precision_reason);
    placement->set_batch_size(p.batch_size);
    placement->set_model_version(p.model_version);
    placement->set_ready_path(p.ready_path);
    placement->set_ready_path_expected_us(static_cast<uint64_t>(p.ready_path_expected_us));
    placement->set_ready_path_load_us(static_cast<uint64_t>(p.ready_path_load_us));
    v1::Timing* timing = response->mutable_timing();
    timing->set_queue_us(result.timing.queue_us);
    timing->set_compute_us(result.timing.compute_us);
    timing->set_load_wait_us(result.timing.load_wait_us);
    timing->set_total_us(MicrosBetween(received, Clock::now()));
    response->set_request_id(request->request_id());
    return absl::OkStatus();
  });
}

void InferenceServiceImpl::ListDevices(GrpcServerCall& server_call) {
  auto* call = RawUnaryCall<v1::ListDevicesRequest, v1::ListDevicesResponse>::Start(server_call);
  if (call == nullptr) return;
  v1::ListDevicesResponse* response = call->response();
  for (const DeviceStatus& status : core_.Devices()) {
    const DeviceInfo& d = status.info;
    v1::DeviceInfo* wire = response->add_devices();
    wire->set_id(d.id.ToString());
    wire->set_kind(KindToWire(d.id.kind));
    wire->set_name(d.name);
    wire->set_available(d.available);
    wire->set_simulated(d.simulated);
    wire->set_backend_detail(d.backend_detail);
    for (DType t : d.supported_dtypes) wire->add_supported_dtypes(DTypeToProto(t));
    wire->set_default_precision(PrecisionToProto(DefaultPrecision(d.precision)));
    wire->set_memory_total_bytes(d.memory_total_bytes);
    wire->set_memory_used_bytes(d.memory_used_bytes);
    wire->set_queue_depth(static_cast<uint32_t>(status.queue_depth));
    for (const ModelQueueDepth& q : status.model_queues) {
      v1::ModelQueue* mq = wire->add_model_queues();
      mq->set_model(q.model);
      mq->set_version(q.version);
      mq->set_depth(static_cast<uint32_t>(q.depth));
    }
    wire->set_in_flight(static_cast<uint32_t>(status.in_flight));
    for (const ResidentModel& r : status.resident) {
      wire->add_resident_models(absl::StrCat(r.key.model, ":", r.key.version, ":", DTypeName(r.key.dtype)));
    }
    for (const std::string& op : status.unsupported_ops) wire->add_unsupported_ops(op);
    wire->set_logical_cores(d.logical_cores);
    wire->set_compute_capability(d.compute_capability);
    wire->set_cache_budget_bytes(status.cache_budget_bytes);
    uint64_t resident_bytes = 0;
    for (const ResidentModel& r : status.resident) resident_bytes += r.bytes;
    wire->set_cache_resident_bytes(resident_bytes);
    wire->set_memory_peak_bytes(d.memory_peak_bytes);
  }
  call->Answer(absl::OkStatus());
}

namespace {

v1::ModelVersionState VersionStateToProto(VersionState state) {
  switch (state) {
    case VersionState::kLoading: return v1::MODEL_VERSION_LOADING;
    case VersionState::kReady: return v1::MODEL_VERSION_READY;
    case VersionState::kUnavailable: return v1::MODEL_VERSION_UNAVAILABLE;
    case VersionState::kUnloading: return v1::MODEL_VERSION_UNLOADING;
  }
  return v1::MODEL_VERSION_STATE_UNSPECIFIED;
}

}  // namespace

void InferenceServiceImpl::ListModels(GrpcServerCall& server_call) {
  auto* call = RawUnaryCall<v1::ListModelsRequest, v1::ListModelsResponse>::Start(server_call);
  if (call == nullptr) return;
  absl::StatusOr<std::vector<ModelStatus>> models = core_.Models();
  if (!models.ok()) {
    call->Answer(models.status());
    return;
  }
  v1::ListModelsResponse* response = call->response();
  for (ModelStatus& model : *models) {
    v1::ModelInfo* info = response->add_models();
    info->set_name(model.name);
    for (int64_t v : model.versions) info->add_versions(v);
    *info->mutable_config() = std::move(model.config);
    for (const ModelKey& key : model.loaded) FillLoaded(key, info->add_loaded());
    for (const DeviceId& d : model.moving) FillPlacement(model, d, "moving", info->add_moves());
    for (const DeviceId& d : model.demoted) FillPlacement(model, d, "demoted", info->add_moves());
    for (const VersionStatus& v : model.states) {
      v1::ModelVersionStatus* status = info->add_version_status();
      status->set_version(v.version);
      status->set_state(VersionStateToProto(v.state));
      status->set_reason(ForClients(v.reason));
      const FileStamp& file = v.stamp.exists() ? v.stamp : v.tried;
      if (file.exists()) status->set_format(std::string(ModelFileFormatName(file)));
    }
    for (const PrecisionReport& r : model.precision) {
      v1::PrecisionCheck* check = info->add_precision_checks();
      check->set_version(r.version);
      check->set_device(r.device);
      check->set_dtype(DTypeToProto(r.dtype));
      check->set_state(r.state);
      check->set_relative_error(r.relative_error);
      check->set_detail(ForClients(r.detail));
    }
    if (!model.problem.ok()) {
      info->set_problem(ForClients(model.problem.message()));
    } else if (!model.config_problem.empty()) {
      info->set_problem(ForClients(model.config_problem));
    }
  }
  call->Answer(absl::OkStatus());
}

void InferenceServiceImpl::LoadModel(GrpcServerCall& server_call) {
  auto* call = RawUnaryCall<v1::LoadModelRequest, v1::LoadModelResponse>::Start(server_call);
  if (call == nullptr) return;
  const v1::LoadModelRequest& request = call->request();
  absl::StatusOr<Precision> precision = PrecisionFromWire(request.precision(), "precision");
  if (!precision.ok()) {
    call->Answer(precision.status());
    return;
  }
  LoadRequest load{request.model(), request.version(), request.device(), *precision, nullptr, nullptr, ""};
  core_.LoadModel(load, [call](absl::StatusOr<LoadResult> result) {
    if (!result.ok()) return call->Answer(result.status());
    v1::LoadModelResponse* response = call->response();
    v1::LoadedModel* loaded = response->mutable_loaded();
    loaded->set_version(result->version);
    loaded->set_device(result->device);
    loaded->set_dtype(DTypeToProto(result->dtype));
    loaded->set_state("resident");
    response->set_load_us(result->load_us);
    call->Answer(absl::OkStatus());
  });
}

void InferenceServiceImpl::UnloadModel(GrpcServerCall& server_call) {
  auto* call = RawUnaryCall<v1::UnloadModelRequest, v1::UnloadModelResponse>::Start(server_call);
  if (call == nullptr) return;
  const v1::UnloadModelRequest& request = call->request();
  absl::StatusOr<Precision> precision = PrecisionFromWire(request.precision(), "precision");
  if (!precision.ok()) {
    call->Answer(precision.status());
    return;
  }
  absl::StatusOr<size_t> n =
      core_.UnloadModel({request.model(), request.version(), request.device(), *precision, nullptr, nullptr, ""});
  if (n.ok()) call->response()->set_unloaded(static_cast<uint32_t>(*n));
  call->Answer(n.status());
}

}  // namespace infergate
