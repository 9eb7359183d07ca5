#pragma once
// What every gRPC front end does with a call before and around the core:
// read the bearer token, turn the client's deadline into the core's clock,
// refuse a call on auth failure, and cancel a submitted request when the
// client goes away.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>

#include "absl/strings/string_view.h"
#include "scheduler/inference_core.h"
#include "service/auth.h"

namespace infergate {

// The `authorization` metadata ("Bearer ..."); empty when absent.
absl::string_view Authorization(const grpc::CallbackServerContext& ctx);

// The client's deadline on the core's steady clock; max() when it set none.
Clock::time_point SteadyDeadline(const grpc::CallbackServerContext& ctx);

// Finishes `reactor` with the auth failure for `role`, if any; true when it did.
bool Refused(const TokenAuth& auth, const grpc::CallbackServerContext& ctx, TokenAuth::Role role,
             grpc::ServerUnaryReactor* reactor);

// A unary reactor that cancels its request in the core when the client
// cancels or its deadline passes. Deletes itself when gRPC is done with it.
class CancellableUnaryReactor final : public grpc::ServerUnaryReactor {
 public:
  void set_handle(std::shared_ptr<RequestHandle> handle);
  void OnCancel() override;
  void OnDone() override { delete this; }

 private:
  std::mutex mu_;
  bool cancelled_ = false;
  std::shared_ptr<RequestHandle> handle_;
};

}  // namespace infergate
