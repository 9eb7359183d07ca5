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
// Threading: gRPC's callback threads; nothing blocks.

#include "core/inference_core.h"
#include "model_store/torchserve_store.h"
#include "service/front_end.h"
#include "service/torchserve_models.h"
#include "torchserve/inference.grpc.pb.h"

namespace infergate {

class TorchServeGrpcService final
    : public org::pytorch::serve::grpc::inference::InferenceAPIsService::CallbackService {
 public:
  // `catalog` may be null; it, `core` and `front_end` must outlive this.
  TorchServeGrpcService(InferenceCore& core, const FrontEnd& front_end, const TorchServeCatalog* catalog);

  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* ctx, const google::protobuf::Empty* request,
                                 org::pytorch::serve::grpc::inference::TorchServeHealthResponse* response) override;
  grpc::ServerUnaryReactor* Predictions(grpc::CallbackServerContext* ctx,
                                        const org::pytorch::serve::grpc::inference::PredictionsRequest* request,
                                        org::pytorch::serve::grpc::inference::PredictionResponse* response) override;

 private:
  InferenceCore& core_;
  const FrontEnd& front_end_;
  const TorchServeModels models_;
};

}  // namespace infergate
