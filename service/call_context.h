#pragma once
// What every gRPC front end does with a call before and around the core:
// read the bearer token and ModelMesh's model id, turn the client's
// deadline into the core's clock, refuse a call on auth failure, start an
// inference call's (infer_call.h) trace and admission from the call's
// metadata, and tie an inference call to a callback reactor. The helpers
// take either server API's context (callback or completion queue).

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "model_store/inference_types.h"
#include "service/auth.h"
#include "service/front_end.h"
#include "service/infer_call.h"

namespace infergate {

// The `authorization` metadata ("Bearer ..."); empty when absent.
absl::string_view Authorization(const grpc::ServerContextBase& ctx);

// The model a call is for: ModelMesh's `mm-model-id` metadata when the call
// carries it (ModelMesh forwards a request for a model it placed here with
// the model's id there, whatever name the body gives), else `body_name`.
std::string ModelNameOf(const grpc::ServerContextBase& ctx, const std::string& body_name);

// `auth.Check` for the call's token, looked up only when `role` needs one.
absl::Status CheckToken(const TokenAuth& auth, const grpc::ServerContextBase& ctx, TokenAuth::Role role);

// The client's deadline on the core's steady clock; max() when it set none.
Clock::time_point SteadyDeadline(const grpc::ServerContextBase& ctx);

// The value of metadata `name` (lower case); empty when absent.
absl::string_view MetadataValue(const grpc::ServerContextBase& ctx, absl::string_view name);

// Finishes `reactor` with the auth failure for `role`, if any; true when it did.
bool Refused(const TokenAuth& auth, const grpc::ServerContextBase& ctx, TokenAuth::Role role,
             grpc::ServerUnaryReactor* reactor);

// The RPC an inference call came by, for its trace: the full method name
// ("inference.GRPCInferenceService/ModelInfer"), service and method.
struct InferRpc {
  absl::string_view full_name;
  absl::string_view service;
  absl::string_view method;
};
inline constexpr InferRpc kV1InferRpc{"infergate.v1.InferenceService/Infer", "infergate.v1.InferenceService", "Infer"};
inline constexpr InferRpc kModelInferRpc{"inference.GRPCInferenceService/ModelInfer", "inference.GRPCInferenceService",
                                         "ModelInfer"};
inline constexpr InferRpc kModelStreamInferRpc{"inference.GRPCInferenceService/ModelStreamInfer",
                                               "inference.GRPCInferenceService", "ModelStreamInfer"};

// Starts `call`'s trace (when the front end traces) as `rpc`, with the
// trace context in the call's metadata: every unary inference call and each
// request of a stream.
void TraceInferCall(InferCall& call, const grpc::ServerContextBase& ctx, const InferRpc& rpc, absl::string_view model);

// InferCall::Admit with the call's token.
bool AdmitInferCall(InferCall& call, const grpc::ServerContextBase& ctx, uint64_t bytes);

// A unary reactor for one inference call (infer_call.h) of a callback-API
// RPC (TorchServe's gRPC Predictions; v1 Infer and ModelInfer are served on
// completion queues, completion_queue_infer.h): finishes with the call's
// status, cancels it when the client cancels or its deadline passes, and
// keeps it (with its share of the in-flight budget) until gRPC is done with
// the call. Deletes itself.
class InferCallReactor final : public grpc::ServerUnaryReactor {
 public:
  // Begins a call for model `model` (as the client named it), traced as
  // `rpc` with the context in the call's metadata.
  InferCallReactor(const FrontEnd& front_end, const grpc::CallbackServerContext& ctx, absl::string_view model,
                   const InferRpc& rpc);
  InferCall& call() { return *call_; }
  // InferCall::Admit with the call's token.
  bool Admit(const grpc::CallbackServerContext& ctx, uint64_t bytes) { return AdmitInferCall(*call_, ctx, bytes); }
  void OnCancel() override { call_->Cancel(); }
  void OnDone() override { delete this; }
  // gRPC runs OnDone and OnCancel on the thread that completes the call
  // (the worker that finished it, or gRPC's own), instead of handing each
  // to its executor thread: one wake-up and context switch less per call.
  // Both are short and block on nothing: OnDone frees the call, OnCancel
  // cancels its request (answering it at once when it is still queued),
  // and neither is called with a lock of ours held (Finish never is).
  // gRPC 1.51 marks this hook internal; its own finish-only reactor uses it.
  bool InternalInlineable() override { return true; }

 private:
  std::shared_ptr<InferCall> call_;
};

}  // namespace infergate
