#pragma once
// The Open Inference Protocol (KServe v2) over gRPC: package `inference`,
// service `GRPCInferenceService`, on the same port as infergate.v1 and
// behind the same TLS, tokens, metrics and drain. Like the v1 service it is
// a stateless front end over the core facade: a v1 and a v2 request for the
// same model share queues and batches.
//
// No gRPC thread waits for a model. Streams keep many requests in flight
// (see open_inference_stream.h).

#include <string>

#include "absl/functional/function_ref.h"
#include "inference/grpc_service.grpc.pb.h"
#include "scheduler/core/inference_core.h"
#include "service/call/call_environment.h"
#include "service/call/infer_call.h"
#include "service/grpc/grpc_infer_calls.h"
#include "service/grpc/grpc_method.h"
#include "service/grpc/raw_unary_call.h"
#include "service/open_inference/open_inference_api.h"

namespace infergate {

// The Open Inference Protocol's gRPC service. ModelStreamInfer is its one
// method registered with gRPC (raw, on the completion-queue API: the
// completion-queue server, completion_queue_server.h, carries it for an
// InferStream); ModelInfer is served on the inference call path by the same
// server (SubmitModelInfer), both registered in its inference table
// (grpc_infer_calls.h), and every other method is one of its method table
// (grpc_method.h); Register adds all three. Every other method is marked generic, so that gRPC reads none
// of their messages itself: a method left unmarked would be registered and
// its message read and parsed before any check.
namespace open_inference_service_base {
using Grpc = inference::GRPCInferenceService;
using Type = Grpc::WithGenericMethod_ServerLive<
    Grpc::WithGenericMethod_ServerReady<Grpc::WithGenericMethod_ModelReady<Grpc::WithGenericMethod_ServerMetadata<
        Grpc::WithGenericMethod_ModelMetadata<Grpc::WithRawMethod_ModelStreamInfer<Grpc::WithGenericMethod_ModelConfig<
            Grpc::WithGenericMethod_ModelStatistics<Grpc::WithGenericMethod_RepositoryIndex<
                Grpc::WithGenericMethod_RepositoryModelLoad<Grpc::WithGenericMethod_RepositoryModelUnload<
                    Grpc::WithGenericMethod_SystemSharedMemoryStatus<Grpc::WithGenericMethod_SystemSharedMemoryRegister<
                        Grpc::WithGenericMethod_SystemSharedMemoryUnregister<
                            Grpc::WithGenericMethod_CudaSharedMemoryStatus<
                                Grpc::WithGenericMethod_CudaSharedMemoryRegister<
                                    Grpc::WithGenericMethod_CudaSharedMemoryUnregister<
                                        Grpc::WithGenericMethod_TraceSetting<Grpc::WithGenericMethod_LogSettings<
                                            Grpc::WithGenericMethod_ModelInfer<Grpc::Service>>>>>>>>>>>>>>>>>>>>;
}  // namespace open_inference_service_base

class OpenInferenceService final : public open_inference_service_base::Type {
 public:
  // Inference goes through `environment`'s call path, the rest through
  // `core`. Neither is owned; both must outlive this.
  OpenInferenceService(InferenceCore& core, const CallEnvironment& environment, std::string server_version);

  // Decodes a ModelInfer call for `model` that `call` admitted and submits
  // it; the answer goes into `response`. `request` (whose bytes the input
  // tensors alias) and `response` must live until the call finishes.
  void SubmitModelInfer(InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                        const inference::ModelInferRequest* request, inference::ModelInferResponse* response) const;

  // Adds ModelInfer and ModelStreamInfer to `infer_calls` and every other
  // method to `methods`; this must outlive them.
  void Register(GrpcMethods& methods, GrpcInferCalls& infer_calls);

 private:
  // Parses the call's request as a `Request`, and answers with what
  // `answer` returns (filling the `Response` when OK). Defined in the .cc.
  template <typename Request, typename Response>
  void Serve(GrpcServerCall& call, absl::FunctionRef<absl::Status(const Request& request, Response* response)> answer);

  void HandleServerLive(GrpcServerCall& call);
  void HandleServerReady(GrpcServerCall& call);
  void HandleModelReady(GrpcServerCall& call);
  void HandleServerMetadata(GrpcServerCall& call);
  void HandleModelMetadata(GrpcServerCall& call);
  void HandleModelConfig(GrpcServerCall& call);
  void HandleModelStatistics(GrpcServerCall& call);
  void HandleRepositoryIndex(GrpcServerCall& call);
  void HandleRepositoryModelLoad(GrpcServerCall& call);
  void HandleRepositoryModelUnload(GrpcServerCall& call);
  // The extensions answered by open_inference_extensions.h.
  void HandleSystemSharedMemoryStatus(GrpcServerCall& call);
  void HandleSystemSharedMemoryRegister(GrpcServerCall& call);
  void HandleSystemSharedMemoryUnregister(GrpcServerCall& call);
  void HandleCudaSharedMemoryStatus(GrpcServerCall& call);
  void HandleCudaSharedMemoryRegister(GrpcServerCall& call);
  void HandleCudaSharedMemoryUnregister(GrpcServerCall& call);
  void HandleTraceSetting(GrpcServerCall& call);
  void HandleLogSettings(GrpcServerCall& call);

  InferenceCore& core_;
  const CallEnvironment& environment_;  // ServerReady and ModelReady say false while it drains
  OpenInferenceApi api_;
};

}  // namespace infergate
