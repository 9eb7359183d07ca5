#include "service/modelmesh/model_mesh_runtime.h"

#include <algorithm>
#include <future>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "scheduler/repository/model_name.h"
#include "service/grpc/guarded_handler.h"
#include "service/grpc/message_bytes.h"
#include "service/grpc/status_convert.h"
#include "service/modelmesh/model_mesh_path.h"

namespace infergate {
namespace {

// The inference methods ModelMesh may forward here, each with where in its
// request the model name is (ModelMesh writes the model id there).
constexpr const char* kForwardedMethods[] = {
    "inference.GRPCInferenceService/ModelInfer",
    "inference.GRPCInferenceService/ModelMetadata",
    "inference.GRPCInferenceService/ModelReady",
    "infergate.v1.InferenceService/Infer",
};

}  // namespace

ModelMeshRuntime::ModelMeshRuntime(InferenceCore& core, ModelMeshOptions options)
    : core_(core),
      options_(std::move(options)),
      models_(ModelMeshModels::Backend{
          [this](const std::string& id, const std::string& folder) { return LoadThroughCore(id, folder); },
          [this](const std::string& id) { core_.ForgetModel(id); },
          [this](const std::string& id) { return ResidentBytes(id); }}) {}

uint64_t ModelMeshRuntime::ResidentBytes(const std::string& id) const {
  uint64_t bytes = 0;
  for (const DeviceStatus& device : core_.Devices()) {
    for (const ResidentModel& r : device.resident) {
      if (r.key.model == id) bytes += r.bytes;
    }
  }
  return bytes;
}

absl::Status ModelMeshRuntime::LoadThroughCore(const std::string& id, const std::string& folder) {
  LoadRequest request;
  request.model = id;
  request.folder = folder;
  auto done = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> loaded = done->get_future();
  core_.LoadModel(request, [done](absl::StatusOr<LoadResult> result) { done->set_value(result.status()); });
  absl::Status status = loaded.get();
  // ModelMeshModels undoes a failed load, so nothing of it stays: ModelMesh
  // reads FAILED_PRECONDITION as exactly that (UNAVAILABLE, which the core
  // gives for a model with no version ready, would read as this runtime
  // being unreachable). Bad requests and a full cache keep their codes.
  if (status.ok() || absl::IsInvalidArgument(status) || absl::IsResourceExhausted(status)) return status;
  return absl::FailedPreconditionError(status.message());
}

template <typename Request, typename Response>
grpc::Status ModelMeshRuntime::Serve(grpc::ServerContext* ctx, grpc::ServerUnaryStreamer<Request, Response>* call,
                                     grpc::Status (ModelMeshRuntime::*method)(grpc::ServerContext*, const Request&,
                                                                              Response*)) {
  Request request;
  if (!call->Read(&request)) return ToGrpcStatus(UnparsableRequest(request));
  Response response;
  grpc::Status status =
      GuardedSync(Request::descriptor()->name(), [&] { return (this->*method)(ctx, request, &response); });
  if (status.ok()) call->Write(response);
  return status;
}

grpc::Status ModelMeshRuntime::StreamedloadModel(grpc::ServerContext* ctx, LoadModelCall* call) {
  return Serve(ctx, call, &ModelMeshRuntime::LoadModel);
}
grpc::Status ModelMeshRuntime::StreamedunloadModel(grpc::ServerContext* ctx, UnloadModelCall* call) {
  return Serve(ctx, call, &ModelMeshRuntime::UnloadModel);
}
grpc::Status ModelMeshRuntime::StreamedpredictModelSize(grpc::ServerContext* ctx, PredictModelSizeCall* call) {
  return Serve(ctx, call, &ModelMeshRuntime::PredictModelSize);
}
grpc::Status ModelMeshRuntime::StreamedmodelSize(grpc::ServerContext* ctx, ModelSizeCall* call) {
  return Serve(ctx, call, &ModelMeshRuntime::ModelSize);
}
grpc::Status ModelMeshRuntime::StreamedruntimeStatus(grpc::ServerContext* ctx, RuntimeStatusCall* call) {
  return Serve(ctx, call, &ModelMeshRuntime::RuntimeStatus);
}

grpc::Status ModelMeshRuntime::LoadModel(grpc::ServerContext* ctx, const mmesh::LoadModelRequest& request,
                                         mmesh::LoadModelResponse* response) {
  const std::string& id = request.modelid();
  if (absl::Status s = ValidateModelName(id, "modelId"); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = CheckModelMeshType(request.modeltype()); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<std::string> folder = ResolveModelMeshPath(request.modelpath(), options_.model_root);
  if (!folder.ok()) return ToGrpcStatus(folder.status());
  std::vector<std::string> placed = models_.Loaded();
  if (core_.KnownModel(id) && std::find(placed.begin(), placed.end(), id) == placed.end()) {
    // A model of the repository itself, or one ModelMesh's load of is still
    // running (ModelMeshModels refuses that one the same way).
    return ToGrpcStatus(absl::FailedPreconditionError(
        absl::StrCat("modelId: '", id,
                     "' is served already (a model of the repository, or a load in progress); "
                     "nothing was loaded")));
  }
  LOG_INFO << "ModelMesh: loading '" << id << "' from " << *folder;
  absl::StatusOr<uint64_t> size = models_.Load(id, *folder, [ctx] { return ctx->IsCancelled(); });
  if (!size.ok()) {
    LOG_WARNING << "ModelMesh: model '" << id << "' not loaded: " << size.status().message();
    return ToGrpcStatus(size.status());
  }
  LOG_INFO << "ModelMesh: model '" << id << "' serves, " << *size << " bytes resident";
  response->set_sizeinbytes(*size);
  return grpc::Status::OK;
}

grpc::Status ModelMeshRuntime::UnloadModel(grpc::ServerContext*, const mmesh::UnloadModelRequest& request,
                                           mmesh::UnloadModelResponse*) {
  if (absl::Status s = ValidateModelName(request.modelid(), "modelId"); !s.ok()) return ToGrpcStatus(s);
  models_.Unload(request.modelid());
  LOG_INFO << "ModelMesh: model '" << request.modelid() << "' unloaded";
  return grpc::Status::OK;
}

grpc::Status ModelMeshRuntime::PredictModelSize(grpc::ServerContext*, const mmesh::PredictModelSizeRequest& request,
                                                mmesh::PredictModelSizeResponse* response) {
  const std::string& id = request.modelid();
  if (absl::Status s = ValidateModelName(id, "modelId"); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = CheckModelMeshType(request.modeltype()); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<std::string> folder = ResolveModelMeshPath(request.modelpath(), options_.model_root);
  if (!folder.ok()) return ToGrpcStatus(folder.status());
  absl::StatusOr<uint64_t> bytes = core_.PredictFootprint(id, *folder);
  if (!bytes.ok()) return ToGrpcStatus(bytes.status());
  response->set_sizeinbytes(*bytes);
  return grpc::Status::OK;
}

grpc::Status ModelMeshRuntime::ModelSize(grpc::ServerContext*, const mmesh::ModelSizeRequest& request,
                                         mmesh::ModelSizeResponse* response) {
  absl::StatusOr<uint64_t> bytes = models_.Size(request.modelid());
  if (!bytes.ok()) return ToGrpcStatus(bytes.status());
  response->set_sizeinbytes(*bytes);
  return grpc::Status::OK;
}

grpc::Status ModelMeshRuntime::RuntimeStatus(grpc::ServerContext*, const mmesh::RuntimeStatusRequest&,
                                             mmesh::RuntimeStatusResponse* response) {
  if (!core_.ready()) {
    response->set_status(mmesh::RuntimeStatusResponse::STARTING);
    return grpc::Status::OK;
  }
  // ModelMesh asks at its own start: whatever it placed before is unknown
  // to it now, so it goes.
  if (size_t dropped = models_.UnloadAll(); dropped > 0) {
    LOG_INFO << "ModelMesh: runtime status asked; unloaded the " << dropped << " model(s) it had placed before";
  }
  uint64_t capacity = 0;
  for (const DeviceStatus& device : core_.Devices()) {
    if (device.info.available) capacity += device.cache_budget_bytes;
  }
  response->set_status(mmesh::RuntimeStatusResponse::READY);
  response->set_capacityinbytes(capacity);
  // Loads run one at a time (the lifecycle takes one update at a time).
  response->set_maxloadingconcurrency(1);
  response->set_modelloadingtimeoutms(static_cast<uint32_t>(options_.load_timeout.count()));
  response->set_defaultmodelsizeinbytes(options_.default_model_size);
  response->set_runtimeversion(options_.version);
  for (const char* method : kForwardedMethods) {
    // Field 1 of each request is the model's name.
    (*response->mutable_methodinfos())[method].add_idinjectionpath(1);
  }
  return grpc::Status::OK;
}

}  // namespace infergate
