#pragma once
// TorchServe's gRPC inference API (org.pytorch.serve.grpc.inference
// .InferenceAPIsService) on the server's gRPC port, for TorchServe's gRPC
// clients: Ping answers TorchServe's health JSON without a token;
// Predictions runs input["data"] (or "body") through the model's handler,
// as POST /predictions does (torchserve_rest.h), on the front ends' one
// call path, and answers the prediction as JSON bytes. StreamPredictions
// and StreamPredictions2 (streamed answers of generative handlers and
// stateful sequences) are not served: UNIMPLEMENTED.
//
// Every method is taken as a generic call by the completion-queue server
// (completion_queue_server.h), so that its message is read only once the
// caller is allowed and the in-flight budget has room for it: Predictions
// is handed here (SubmitPredictions, registered in its inference table),
// Ping is a method of its method table (both by Register), and the
// streamed methods, served by neither, are answered UNIMPLEMENTED unread.
//
// Threading: the completion-queue pollers; nothing blocks (an image is
// decoded on the front end's handler pool, handler_work_pool.h).

#include "scheduler/core/inference_core.h"
#include "scheduler/repository/torchserve/torchserve_store.h"
#include "service/call/call_environment.h"
#include "service/call/infer_call.h"
#include "service/grpc/call_context.h"
#include "service/grpc/grpc_infer_calls.h"
#include "service/grpc/grpc_method.h"
#include "service/torchserve/torchserve_models.h"
#include "torchserve/inference.grpc.pb.h"

namespace infergate {

// The Predictions RPC, as calls of it are counted and traced.
extern const InferRpc kTorchServePredictionsRpc;

class TorchServeGrpcService {
 public:
  // `catalog` may be null; it, `core` and `environment` must outlive this.
  TorchServeGrpcService(InferenceCore& core, const CallEnvironment& environment, const TorchServeCatalog* catalog);

  // Adds Ping to `methods` and Predictions to `infer_calls`; this must
  // outlive them.
  void Register(GrpcMethods& methods, GrpcInferCalls& infer_calls);

  // Runs one admitted Predictions call for `model` (its name from the
  // metadata or the request): input["data"] (or "body") through the
  // model's handler into `response`. The call ends in a refusal or its
  // answer; `request` and `response` must live until it has ended.
  void SubmitPredictions(InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                         org::pytorch::serve::grpc::inference::PredictionsRequest* request,
                         org::pytorch::serve::grpc::inference::PredictionResponse* response) const;

 private:
  void Ping(GrpcServerCall& call);

  InferenceCore& core_;
  const CallEnvironment& environment_;
  const TorchServeModels models_;
};

}  // namespace infergate
