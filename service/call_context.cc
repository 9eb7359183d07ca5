#include "service/call_context.h"

#include "service/admission.h"
#include "service/status_convert.h"

namespace infergate {

absl::string_view Authorization(const grpc::CallbackServerContext& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  return it == md.end() ? absl::string_view() : absl::string_view(it->second.data(), it->second.size());
}

std::string ModelNameOf(const grpc::CallbackServerContext& ctx, const std::string& body_name) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("mm-model-id");
  return it == md.end() ? body_name : std::string(it->second.data(), it->second.size());
}

Clock::time_point SteadyDeadline(const grpc::CallbackServerContext& ctx) {
  auto deadline = ctx.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return Clock::time_point::max();
  auto left = deadline - std::chrono::system_clock::now();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(left);
}

absl::Status CheckToken(const TokenAuth& auth, const grpc::CallbackServerContext& ctx, TokenAuth::Role role) {
  return auth.Check([&ctx] { return Authorization(ctx); }, role);
}

bool Refused(const TokenAuth& auth, const grpc::CallbackServerContext& ctx, TokenAuth::Role role,
             grpc::ServerUnaryReactor* reactor) {
  absl::Status s = CheckToken(auth, ctx, role);
  if (s.ok()) return false;
  reactor->Finish(ToGrpcStatus(s));
  return true;
}

absl::Status AdmitInference(const TokenAuth& auth, const grpc::CallbackServerContext& ctx, bool draining,
                            Metrics* metrics, InflightBudget* budget, uint64_t bytes,
                            CancellableUnaryReactor* reactor) {
  absl::StatusOr<InflightBudget::Reservation> admitted =
      Admit(auth, [&ctx] { return Authorization(ctx); }, draining, metrics, reactor ? budget : nullptr, bytes);
  if (!admitted.ok()) return admitted.status();
  if (reactor) reactor->hold(*std::move(admitted));
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* FinishRefused(grpc::ServerUnaryReactor* reactor, const absl::Status& status,
                                        Metrics* metrics, const std::string& model_label, Clock::time_point received) {
  RecordRefusal(metrics, status, model_label, received);
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Both cancel outside the lock: cancelling a queued request answers it on
// this thread, and the answer's callback may come back to this reactor.
void CancellableUnaryReactor::set_handle(std::shared_ptr<RequestHandle> handle) {
  bool cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    handle_ = handle;
    cancelled = cancelled_;
  }
  if (cancelled && handle) handle->Cancel();
}

void CancellableUnaryReactor::OnCancel() {
  std::shared_ptr<RequestHandle> handle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    handle = handle_;
  }
  if (handle) handle->Cancel();
}

}  // namespace infergate
