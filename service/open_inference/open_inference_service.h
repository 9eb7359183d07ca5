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
#include "service/call/front_end.h"
#include "service/call/infer_call.h"
#include "service/open_inference/open_inference_api.h"
#include "service/grpc/raw_unary_call.h"

namespace infergate {

// The Open Inference Protocol's gRPC service with ModelInfer and
// ModelStreamInfer on gRPC's completion-queue API (served by
// completion_queue_infer.h, which calls SubmitModelInfer and runs streams as
// InferStreams) and every other method on the callback API. Every method is
// raw: the server parses each request itself (message_bytes.h), so a request
// that does not parse is answered INVALID_ARGUMENT naming the message it
// should have been; the callback methods through RawUnaryCall. Each method
// is marked once, from the generated synchronous base: a method left
// unmarked would be served synchronously, on a thread pool of gRPC's.
namespace open_inference_service_base {
using Grpc = inference::GRPCInferenceService;
using Type = Grpc::WithRawCallbackMethod_ServerLive<Grpc::WithRawCallbackMethod_ServerReady<
    Grpc::WithRawCallbackMethod_ModelReady<Grpc::WithRawCallbackMethod_ServerMetadata<
    Grpc::WithRawCallbackMethod_ModelMetadata<Grpc::WithRawMethod_ModelStreamInfer<
    Grpc::WithRawCallbackMethod_ModelConfig<Grpc::WithRawCallbackMethod_ModelStatistics<
    Grpc::WithRawCallbackMethod_RepositoryIndex<Grpc::WithRawCallbackMethod_RepositoryModelLoad<
    Grpc::WithRawCallbackMethod_RepositoryModelUnload<Grpc::WithRawCallbackMethod_SystemSharedMemoryStatus<
    Grpc::WithRawCallbackMethod_SystemSharedMemoryRegister<Grpc::WithRawCallbackMethod_SystemSharedMemoryUnregister<
    Grpc::WithRawCallbackMethod_CudaSharedMemoryStatus<Grpc::WithRawCallbackMethod_CudaSharedMemoryRegister<
    Grpc::WithRawCallbackMethod_CudaSharedMemoryUnregister<Grpc::WithRawCallbackMethod_TraceSetting<
    Grpc::WithRawCallbackMethod_LogSettings<Grpc::WithGenericMethod_ModelInfer<Grpc::Service>>>>>>>>>>>>>>>>>>>>;
}  // namespace open_inference_service_base

class OpenInferenceService final : public open_inference_service_base::Type {
 public:
  // Inference goes through `front_end`'s call path, the rest through
  // `core`. Neither is owned; both must outlive this.
  OpenInferenceService(InferenceCore& core, const FrontEnd& front_end, std::string server_version);

  // Decodes a ModelInfer call for `model` that `call` admitted and submits
  // it; the answer goes into `response`. `request` (whose bytes the input
  // tensors alias) and `response` must live until the call finishes.
  void SubmitModelInfer(InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                        const inference::ModelInferRequest* request, inference::ModelInferResponse* response) const;

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RepositoryModelUnload(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) override;

  // The extensions answered by open_inference_extensions.h.
  grpc::ServerUnaryReactor* SystemSharedMemoryStatus(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryRegister(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryStatus(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryRegister(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryUnregister(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* TraceSetting(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* LogSettings(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;

 private:
  // Serves a call of a method that needs the caller's inference token:
  // checks the token, parses `in` as a `Request`, and answers with what
  // `answer` returns (filling the `Response` when OK). Defined in the .cc.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* ServeWithToken(
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in, grpc::ByteBuffer* out,
      absl::FunctionRef<absl::Status(const Request& request, Response* response)> answer);

  InferenceCore& core_;
  const FrontEnd& front_end_;  // ServerReady and ModelReady say false while it drains
  OpenInferenceApi api_;
};

}  // namespace infergate
