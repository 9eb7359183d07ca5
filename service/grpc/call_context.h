#pragma once
// What every gRPC front end does with a call before and around the core:
// read the bearer token and ModelMesh's model id, turn the client's
// deadline into the core's clock, refuse a call on auth failure, and start
// an inference call's (infer_call.h) trace and admission from the call's
// metadata. The helpers take any server API's context.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "scheduler/model/inference_types.h"
#include "service/call/auth.h"
#include "service/call/call_environment.h"
#include "service/call/infer_call.h"

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

}  // namespace infergate
