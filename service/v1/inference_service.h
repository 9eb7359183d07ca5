#pragma once
// The gRPC face of infergate.v1.InferenceService: decodes and validates wire
// requests, hands them to the core facade, encodes the replies. No gRPC
// thread waits for a model. Stateless: inference takes the front ends' one
// call path (infer_call.h), every lookup goes through the core.

#include "infergate/v1/inference.grpc.pb.h"
#include "scheduler/core/inference_core.h"
#include "service/call/call_environment.h"
#include "service/call/infer_call.h"
#include "service/call/tensor_codec.h"
#include "service/grpc/grpc_infer_calls.h"
#include "service/grpc/grpc_method.h"

namespace infergate {

// infergate.v1.InferenceService. Infer is served on the inference call
// path of the completion-queue server (completion_queue_server.h), which
// calls SubmitInfer as the service registered it (grpc_infer_calls.h); the
// listings and loads are methods of its table (grpc_method.h). Register
// adds both. Every request is parsed by the
// server (message_bytes.h), so one that does not parse is answered
// INVALID_ARGUMENT naming the message it should have been.
class InferenceServiceImpl {
 public:
  // Inference goes through `environment`'s call path; the listings and
  // loads through `core`. Neither is owned; both must outlive the service.
  InferenceServiceImpl(InferenceCore& core, const CallEnvironment& environment);

  // Adds ListDevices, ListModels (inference token), LoadModel and
  // UnloadModel (admin token) to `methods`, and Infer to `infer_calls`;
  // this must outlive them.
  void Register(GrpcMethods& methods, GrpcInferCalls& infer_calls);

  // Checks and decodes an Infer call for `model` that `call` admitted, and
  // submits it; the answer goes into `response`. `request` (whose bytes the
  // input tensors alias) and `response` must live until the call finishes.
  void SubmitInfer(InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                   const v1::InferRequest* request, v1::InferResponse* response) const;

 private:
  void ListDevices(GrpcServerCall& call);
  void ListModels(GrpcServerCall& call);
  void LoadModel(GrpcServerCall& call);
  void UnloadModel(GrpcServerCall& call);

  InferenceCore& core_;
  const CallEnvironment& environment_;
};

}  // namespace infergate
