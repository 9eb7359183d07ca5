#pragma once
// The gRPC face of infergate.v1.InferenceService: decodes and validates wire
// requests, hands them to the core facade, encodes the replies. Callback
// API, so no gRPC thread waits for a model. Stateless apart from the drain
// flag: every lookup goes through the core.

#include <atomic>

#include "infergate/v1/inference.grpc.pb.h"
#include "scheduler/inference_core.h"
#include "service/auth.h"
#include "service/inflight_budget.h"
#include "service/metrics.h"
#include "service/tensor_codec.h"

namespace infergate {

class InferenceServiceImpl final : public v1::InferenceService::CallbackService {
 public:
  // `metrics` may be null (metrics disabled).
  // `core` and `metrics` are not owned and must outlive the service.
  // `budget` (may be null: no limit) bounds the bytes of requests in flight.
  InferenceServiceImpl(InferenceCore& core, CodecLimits limits, Metrics* metrics = nullptr, TokenAuth auth = {},
                       InflightBudget* budget = nullptr);

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

  // From now on new inference calls get UNAVAILABLE; calls already
  // accepted run to the end.
  void StartDraining() { draining_.store(true); }

 private:
  std::atomic<bool> draining_{false};
  InferenceCore& core_;
  CodecLimits limits_;
  Metrics* metrics_;
  TokenAuth auth_;
  InflightBudget* budget_;
};

}  // namespace infergate
