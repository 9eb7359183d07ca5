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
// Threading: gRPC's callback threads; nothing blocks (an image is decoded on
// the front end's handler pool, handler_work_pool.h).

#include "scheduler/core/inference_core.h"
#include "scheduler/repository/torchserve/torchserve_store.h"
#include "service/call/front_end.h"
#include "service/torchserve/torchserve_models.h"
#include "torchserve/inference.grpc.pb.h"

namespace infergate {

// Ping and Predictions are raw (their requests parsed by the server, so one
// that does not parse is answered INVALID_ARGUMENT: raw_unary_call.h); the
// streamed methods keep gRPC's UNIMPLEMENTED.
namespace torchserve_grpc_base {
using Grpc = org::pytorch::serve::grpc::inference::InferenceAPIsService;
using Type = Grpc::WithRawCallbackMethod_Ping<Grpc::WithRawCallbackMethod_Predictions<
    Grpc::WithCallbackMethod_StreamPredictions<Grpc::WithCallbackMethod_StreamPredictions2<Grpc::Service>>>>;
}  // namespace torchserve_grpc_base

class TorchServeGrpcService final : public torchserve_grpc_base::Type {
 public:
  // `catalog` may be null; it, `core` and `front_end` must outlive this.
  TorchServeGrpcService(InferenceCore& core, const FrontEnd& front_end, const TorchServeCatalog* catalog);

  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Predictions(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;

 private:
  InferenceCore& core_;
  const FrontEnd& front_end_;
  const TorchServeModels models_;
};

}  // namespace infergate
