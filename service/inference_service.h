#pragma once
// The gRPC face of infergate.v1.InferenceService: decodes and validates wire
// requests, hands them to the scheduler, encodes the replies. Callback API,
// so no gRPC thread waits for a model.

#include <atomic>

#include "devices/device_registry.h"
#include "infergate/v1/inference.grpc.pb.h"
#include "scheduler/model_repository.h"
#include "scheduler/scheduler.h"
#include "service/auth.h"
#include "service/metrics.h"
#include "service/tensor_codec.h"

namespace infergate {

class InferenceServiceImpl final : public v1::InferenceService::CallbackService {
 public:
  // `metrics` may be null (metrics disabled).
  InferenceServiceImpl(Scheduler& scheduler, ModelRepository& repository, DeviceRegistry& devices,
                       CodecLimits limits, Metrics* metrics = nullptr, TokenAuth auth = {});

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
  Scheduler& scheduler_;
  ModelRepository& repository_;
  DeviceRegistry& devices_;
  CodecLimits limits_;
  Metrics* metrics_;
  TokenAuth auth_;
};

}  // namespace infergate
