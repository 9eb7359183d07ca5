#include "service/admission.h"

namespace infergate {

absl::StatusOr<InflightBudget::Reservation> Admit(const TokenAuth& auth,
                                                  absl::FunctionRef<absl::string_view()> authorization,
                                                  bool draining, Metrics* metrics, InflightBudget* budget,
                                                  uint64_t bytes) {
  if (absl::Status s = auth.Check(authorization, TokenAuth::Role::kInference); !s.ok()) return s;
  if (draining) {
    if (metrics) metrics->OnAdmissionRejection("draining");
    return absl::UnavailableError("server is draining; retry on another replica");
  }
  if (!budget) return InflightBudget::Reservation();
  absl::StatusOr<InflightBudget::Reservation> reserved = budget->Reserve(bytes);
  if (!reserved.ok() && metrics) metrics->OnAdmissionRejection("inflight_bytes");
  return reserved;
}

void RecordRefusal(Metrics* metrics, const absl::Status& status, const std::string& model_label,
                   Clock::time_point received) {
  if (metrics) metrics->RecordInfer({model_label, ""}, status, nullptr, MicrosBetween(received, Clock::now()));
}

}  // namespace infergate
