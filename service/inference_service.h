#pragma once
// The gRPC face of infergate.v1.InferenceService: decodes and validates wire
// requests, hands them to the core facade, encodes the replies. Callback
// API, so no gRPC thread waits for a model. Stateless: inference takes the front
// ends' one call path (infer_call.h), every lookup goes through the core.

#include "infergate/v1/inference.grpc.pb.h"
#include "core/inference_core.h"
#include "service/front_end.h"
#include "service/tensor_codec.h"

namespace infergate {

class InferenceServiceImpl final : public v1::InferenceService::CallbackService {
 public:
  // Inference goes through `front_end`'s call path; the listings and
  // loads through `core`. Neither is owned; both must outlive the service.
  InferenceServiceImpl(InferenceCore& core, const FrontEnd& front_end);

  grpc::ServerUnaryReactor* Infer(grpc::CallbackServerContext* ctx, const v1::InferRequest* request,
                                  v1::InferResponse* response) override;
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* ctx, const v1::ListDevicesRequest* request,
                                        v1::ListDevicesResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* ctx, const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* LoadModel(grpc::CallbackServerContext* ctx, const v1::LoadModelRequest* request,
                                      v1::LoadModelResponse* response) override;
  grpc::ServerUnaryReactor* UnloadModel(grpc::CallbackServerContext* ctx, const v1::UnloadModelRequest* request,
                                        v1::UnloadModelResponse* response) override;

 private:
  InferenceCore& core_;
  const FrontEnd& front_end_;
};

}  // namespace infergate
