#pragma once
// KServe ModelMesh's model-runtime SPI (mmesh.ModelRuntime), served on its
// own port (--modelmesh-address) so ModelMesh places models on this server
// without an adapter:
//
//   loadModel        serves the folder at modelPath as model modelId and
//                    answers once it serves, with the bytes its resident
//                    copies hold in the cache (ModelMeshModels has the
//                    rules for cancelled and failed loads)
//   unloadModel      takes it out altogether (NOT_FOUND from then on)
//   predictModelSize the learned footprint, else the file-size estimate,
//                    without loading anything
//   modelSize        the bytes its resident copies hold now
//   runtimeStatus    STARTING until the repository is served; then READY
//                    after unloading every model ModelMesh placed earlier,
//                    with the device budgets' sum as capacity and the
//                    inference methods ModelMesh may forward
//
// How a placed model meets the per-device cache: it is an ordinary model
// of the repository under its id. Its first copy loads where `auto` puts a
// cold start; requests then route as usual (a copy on another device loads
// on demand, and the per-device caches evict idle copies by LRU as always;
// an evicted copy loads again on the next request). ModelMesh sees the sum
// of a model's copies against the sum of the device budgets.
//
// Threading: a synchronous gRPC service; every method may run on any of
// gRPC's threads and blocks until done. The core must outlive it.
//
// Each method is served "streamed unary" (gRPC's sync API reading the one
// request itself), so that bytes that are not the method's request are
// answered INVALID_ARGUMENT naming the message they should have been
// (message_bytes.h), where the plain sync API answers INTERNAL with no
// message.

#include <chrono>
#include <cstdint>
#include <string>

#include "mmesh/model_runtime.grpc.pb.h"
#include "scheduler/core/inference_core.h"
#include "service/modelmesh/model_mesh_models.h"

namespace infergate {

struct ModelMeshOptions {
  std::string model_root;  // modelPath must lie under it; empty: anywhere
  std::chrono::milliseconds load_timeout{120000};
  uint64_t default_model_size = uint64_t{256} << 20;
  std::string version;  // the server's
};

class ModelMeshRuntime final : public mmesh::ModelRuntime::StreamedUnaryService {
 public:
  ModelMeshRuntime(InferenceCore& core, ModelMeshOptions options);

  using LoadModelCall = grpc::ServerUnaryStreamer<mmesh::LoadModelRequest, mmesh::LoadModelResponse>;
  using UnloadModelCall = grpc::ServerUnaryStreamer<mmesh::UnloadModelRequest, mmesh::UnloadModelResponse>;
  using PredictModelSizeCall =
      grpc::ServerUnaryStreamer<mmesh::PredictModelSizeRequest, mmesh::PredictModelSizeResponse>;
  using ModelSizeCall = grpc::ServerUnaryStreamer<mmesh::ModelSizeRequest, mmesh::ModelSizeResponse>;
  using RuntimeStatusCall = grpc::ServerUnaryStreamer<mmesh::RuntimeStatusRequest, mmesh::RuntimeStatusResponse>;

  grpc::Status StreamedloadModel(grpc::ServerContext* ctx, LoadModelCall* call) override;
  grpc::Status StreamedunloadModel(grpc::ServerContext* ctx, UnloadModelCall* call) override;
  grpc::Status StreamedpredictModelSize(grpc::ServerContext* ctx, PredictModelSizeCall* call) override;
  grpc::Status StreamedmodelSize(grpc::ServerContext* ctx, ModelSizeCall* call) override;
  grpc::Status StreamedruntimeStatus(grpc::ServerContext* ctx, RuntimeStatusCall* call) override;

 private:
  // Reads the call's request, runs `method` on it and answers: the
  // response when it returns OK, else its status alone.
  template <typename Request, typename Response>
  grpc::Status Serve(grpc::ServerContext* ctx, grpc::ServerUnaryStreamer<Request, Response>* call,
                     grpc::Status (ModelMeshRuntime::*method)(grpc::ServerContext*, const Request&, Response*));

  grpc::Status LoadModel(grpc::ServerContext* ctx, const mmesh::LoadModelRequest& request,
                         mmesh::LoadModelResponse* response);
  grpc::Status UnloadModel(grpc::ServerContext* ctx, const mmesh::UnloadModelRequest& request,
                           mmesh::UnloadModelResponse* response);
  grpc::Status PredictModelSize(grpc::ServerContext* ctx, const mmesh::PredictModelSizeRequest& request,
                                mmesh::PredictModelSizeResponse* response);
  grpc::Status ModelSize(grpc::ServerContext* ctx, const mmesh::ModelSizeRequest& request,
                         mmesh::ModelSizeResponse* response);
  grpc::Status RuntimeStatus(grpc::ServerContext* ctx, const mmesh::RuntimeStatusRequest& request,
                             mmesh::RuntimeStatusResponse* response);

  // The bytes model `id`'s resident copies hold, every device together.
  uint64_t ResidentBytes(const std::string& id) const;
  // Serves `folder` as `id` through the core; returns once it serves.
  absl::Status LoadThroughCore(const std::string& id, const std::string& folder);

  InferenceCore& core_;
  const ModelMeshOptions options_;
  ModelMeshModels models_;
};

}  // namespace infergate
