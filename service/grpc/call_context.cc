#include "service/grpc/call_context.h"

#include "service/grpc/status_convert.h"

namespace infergate {

absl::string_view MetadataValue(const grpc::ServerContextBase& ctx, absl::string_view name) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(grpc::string_ref(name.data(), name.size()));
  return it == md.end() ? absl::string_view() : absl::string_view(it->second.data(), it->second.size());
}

absl::string_view Authorization(const grpc::ServerContextBase& ctx) { return MetadataValue(ctx, "authorization"); }

std::string ModelNameOf(const grpc::ServerContextBase& ctx, const std::string& body_name) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("mm-model-id");
  return it == md.end() ? body_name : std::string(it->second.data(), it->second.size());
}

Clock::time_point SteadyDeadline(const grpc::ServerContextBase& ctx) {
  auto deadline = ctx.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return Clock::time_point::max();
  auto left = deadline - std::chrono::system_clock::now();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(left);
}

absl::Status CheckToken(const TokenAuth& auth, const grpc::ServerContextBase& ctx, TokenAuth::Role role) {
  return auth.Check([&ctx] { return Authorization(ctx); }, role);
}

void TraceInferCall(InferCall& call, const grpc::ServerContextBase& ctx, const InferRpc& rpc, absl::string_view model) {
  if (!call.environment().tracing()) return;
  CallTraceStart start;
  start.transport = CallTransport::kGrpc;
  start.span_name = rpc.full_name;
  start.rpc_service = rpc.service;
  start.rpc_method = rpc.method;
  start.model = model;
  call.Trace(start, [&ctx](absl::string_view name) { return MetadataValue(ctx, name); });
}

bool AdmitInferCall(InferCall& call, const grpc::ServerContextBase& ctx, uint64_t bytes) {
  return call.Admit([&ctx] { return Authorization(ctx); }, bytes);
}

}  // namespace infergate
