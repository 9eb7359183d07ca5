#include "scheduler/execution/drain_refusal.h"

#include "absl/strings/cord.h"

namespace infergate {
namespace {

constexpr absl::string_view kMark = "infergate.dev/drain-refusal";

}  // namespace

absl::Status DrainRefusal(absl::string_view message) {
  absl::Status status = absl::UnavailableError(message);
  status.SetPayload(kMark, absl::Cord());
  return status;
}

absl::Status DrainingRefusal() { return DrainRefusal("server is draining; retry on another replica"); }

bool IsDrainRefusal(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable && status.GetPayload(kMark).has_value();
}

}  // namespace infergate
