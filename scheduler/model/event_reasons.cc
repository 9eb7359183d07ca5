#include "scheduler/model/event_reasons.h"

namespace infergate {

absl::string_view RejectionReasonName(RejectionReason reason) {
  switch (reason) {
    case RejectionReason::kQueueFull: return "queue_full";
    case RejectionReason::kModelQueueFull: return "model_queue_full";
    case RejectionReason::kQueueTimeout: return "queue_timeout";
    case RejectionReason::kDeadline: return "deadline";
    case RejectionReason::kCancelled: return "cancelled";
    case RejectionReason::kDraining: return "draining";
    case RejectionReason::kInflightBytes: return "inflight_bytes";
  }
  return "unknown";
}

absl::string_view ModelUpdateResultName(ModelUpdateResult result) {
  switch (result) {
    case ModelUpdateResult::kLoaded: return "loaded";
    case ModelUpdateResult::kFailed: return "failed";
    case ModelUpdateResult::kRemoved: return "removed";
    case ModelUpdateResult::kUnloaded: return "unloaded";
  }
  return "unknown";
}

absl::string_view EvictionReasonName(EvictionReason reason) {
  switch (reason) {
    case EvictionReason::kBudget: return "budget";
    case EvictionReason::kOom: return "oom";
    case EvictionReason::kUnload: return "unload";
    case EvictionReason::kDemoted: return "demoted";
  }
  return "unknown";
}

absl::string_view PrecisionCheckResultName(PrecisionCheckResult result) {
  switch (result) {
    case PrecisionCheckResult::kPassed: return "passed";
    case PrecisionCheckResult::kFailed: return "failed";
    case PrecisionCheckResult::kSkipped: return "skipped";
    case PrecisionCheckResult::kDropped: return "dropped";
  }
  return "unknown";
}

absl::string_view PrecisionCheckKindName(PrecisionCheckKind kind) {
  switch (kind) {
    case PrecisionCheckKind::kCheck: return "check";
    case PrecisionCheckKind::kRunning: return "running";
  }
  return "unknown";
}

}  // namespace infergate
