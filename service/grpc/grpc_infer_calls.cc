#include "service/grpc/grpc_infer_calls.h"

#include "absl/strings/strip.h"

namespace infergate {

void GrpcInferCalls::AddUnaryExchange(const InferRpc& rpc, std::function<std::unique_ptr<UnaryInferExchange>()> make) {
  unary_.push_back({rpc.full_name, std::move(make)});
}

void GrpcInferCalls::SetStream(InferStreamMethod method) { stream_ = std::move(method); }

std::unique_ptr<UnaryInferExchange> GrpcInferCalls::ExchangeFor(absl::string_view method) const {
  absl::ConsumePrefix(&method, "/");
  for (const Unary& unary : unary_) {
    if (unary.full_name == method) return unary.make();
  }
  return nullptr;
}

}  // namespace infergate
