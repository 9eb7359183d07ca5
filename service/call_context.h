#pragma once
// What every gRPC front end does with a call before and around the core:
// read the bearer token, turn the client's deadline into the core's clock,
// refuse a call on auth failure, and cancel a submitted request when the
// client goes away.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/string_view.h"
#include "scheduler/inference_core.h"
#include "service/auth.h"
#include "service/inflight_budget.h"
#include "service/metrics.h"

namespace infergate {

// The `authorization` metadata ("Bearer ..."); empty when absent.
absl::string_view Authorization(const grpc::CallbackServerContext& ctx);

// The model a call is for: ModelMesh's `mm-model-id` metadata when the call
// carries it (ModelMesh forwards a request for a model it placed here with
// the model's id there, whatever name the body gives), else `body_name`.
std::string ModelNameOf(const grpc::CallbackServerContext& ctx, const std::string& body_name);

// `auth.Check` for the call's token, looked up only when `role` needs one.
absl::Status CheckToken(const TokenAuth& auth, const grpc::CallbackServerContext& ctx, TokenAuth::Role role);

// The client's deadline on the core's steady clock; max() when it set none.
Clock::time_point SteadyDeadline(const grpc::CallbackServerContext& ctx);

// Finishes `reactor` with the auth failure for `role`, if any; true when it did.
bool Refused(const TokenAuth& auth, const grpc::CallbackServerContext& ctx, TokenAuth::Role role,
             grpc::ServerUnaryReactor* reactor);

class CancellableUnaryReactor;

// Whether an inference call may go ahead: its token, the server's drain
// flag, then room for its `bytes` in `budget` (may be null), which
// `reactor` then holds until gRPC is done with the call. Refusals for
// draining and budget are counted in `metrics` (may be null).
absl::Status AdmitInference(const TokenAuth& auth, const grpc::CallbackServerContext& ctx, bool draining,
                            Metrics* metrics, InflightBudget* budget = nullptr, uint64_t bytes = 0,
                            CancellableUnaryReactor* reactor = nullptr);

// Finishes an inference call refused before it reached the core, counting
// it under `model_label` (a repository model or "").
grpc::ServerUnaryReactor* FinishRefused(grpc::ServerUnaryReactor* reactor, const absl::Status& status,
                                        Metrics* metrics, const std::string& model_label, Clock::time_point received);

// A unary reactor that cancels its request in the core when the client
// cancels or its deadline passes. Deletes itself when gRPC is done with it.
class CancellableUnaryReactor final : public grpc::ServerUnaryReactor {
 public:
  void set_handle(std::shared_ptr<RequestHandle> handle);
  // Keeps the call's share of the in-flight budget until gRPC is done.
  void hold(InflightBudget::Reservation reservation) { reservation_ = std::move(reservation); }
  void OnCancel() override;
  void OnDone() override { delete this; }

 private:
  std::mutex mu_;
  bool cancelled_ = false;
  std::shared_ptr<RequestHandle> handle_;
  InflightBudget::Reservation reservation_;
};

}  // namespace infergate
