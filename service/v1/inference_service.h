#pragma once
// The gRPC face of infergate.v1.InferenceService: decodes and validates wire
// requests, hands them to the core facade, encodes the replies. Callback
// API, so no gRPC thread waits for a model. Stateless: inference takes the front
// ends' one call path (infer_call.h), every lookup goes through the core.

#include "infergate/v1/inference.grpc.pb.h"
#include "scheduler/core/inference_core.h"
#include "service/call/front_end.h"
#include "service/call/infer_call.h"
#include "service/call/tensor_codec.h"

namespace infergate {

// infergate.v1.InferenceService with Infer on gRPC's completion-queue API
// (served by completion_queue_infer.h, which calls SubmitInfer) and every
// other method on the callback API. Every method is raw: the server parses
// each request itself (message_bytes.h), so a request that does not parse is
// answered INVALID_ARGUMENT naming the message it should have been; the
// callback methods through RawUnaryCall. Each method is marked once, from
// the generated synchronous base: a method left unmarked would be served
// synchronously, on a thread pool of gRPC's.
using V1InferenceServiceBase = v1::InferenceService::WithRawCallbackMethod_ListDevices<
    v1::InferenceService::WithRawCallbackMethod_ListModels<v1::InferenceService::WithRawCallbackMethod_LoadModel<
        v1::InferenceService::WithRawCallbackMethod_UnloadModel<
            v1::InferenceService::WithGenericMethod_Infer<v1::InferenceService::Service>>>>>;

class InferenceServiceImpl final : public V1InferenceServiceBase {
 public:
  // Inference goes through `front_end`'s call path; the listings and
  // loads through `core`. Neither is owned; both must outlive the service.
  InferenceServiceImpl(InferenceCore& core, const FrontEnd& front_end);

  // Checks and decodes an Infer call for `model` that `call` admitted, and
  // submits it; the answer goes into `response`. `request` (whose bytes the
  // input tensors alias) and `response` must live until the call finishes.
  void SubmitInfer(InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                   const v1::InferRequest* request, v1::InferResponse* response) const;
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* LoadModel(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* UnloadModel(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;

 private:
  InferenceCore& core_;
  const FrontEnd& front_end_;
};

}  // namespace infergate
