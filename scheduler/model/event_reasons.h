#pragma once
// The closed sets of reasons and results the core reports to its observer
// (metrics, logs), as enums; each is turned into its label text only at the
// edge, by the ...Name functions, as FallbackReason is. A metric's label
// values are these sets and no others, so its series can be created up
// front and never grow from client input.

#include "absl/strings/string_view.h"

namespace infergate {

// Why a request was answered without running (infergate_rejections_total).
enum class RejectionReason {
  kQueueFull,       // the device queue's capacity
  kModelQueueFull,  // the model's max_queue_size
  kQueueTimeout,    // the model's (or the request's) queue timeout, REJECT
  kDeadline,        // the client's deadline passed while queued
  kCancelled,       // the client went away while it was queued
  kDraining,        // the server is draining (a front end's refusal)
  kInflightBytes,   // the in-flight byte budget is full (a front end's refusal)
};
inline constexpr RejectionReason kRejectionReasons[] = {
    RejectionReason::kQueueFull,    RejectionReason::kModelQueueFull, RejectionReason::kQueueTimeout,
    RejectionReason::kDeadline,     RejectionReason::kCancelled,      RejectionReason::kDraining,
    RejectionReason::kInflightBytes};
absl::string_view RejectionReasonName(RejectionReason reason);

// What a repository change to one model version did
// (infergate_model_updates_total).
enum class ModelUpdateResult {
  kLoaded,    // a new file or version now answers
  kFailed,    // it was refused; the last good one still answers
  kRemoved,   // the version or model left the repository
  kUnloaded,  // an explicit unload took the model out of service
};
absl::string_view ModelUpdateResultName(ModelUpdateResult result);

// Why a model's copy left a device's cache (infergate_model_evictions_total).
enum class EvictionReason {
  kBudget,   // room was needed for another model within the cache budget
  kOom,      // the device ran out of memory
  kUnload,   // an unload asked for it
  kDemoted,  // the move policy gave its room to a model with more to gain there (move_policy.h)
};
inline constexpr EvictionReason kEvictionReasons[] = {EvictionReason::kBudget, EvictionReason::kOom,
                                                      EvictionReason::kUnload, EvictionReason::kDemoted};
absl::string_view EvictionReasonName(EvictionReason reason);

// How an accuracy check of a reduced dtype ended
// (infergate_precision_checks_total).
enum class PrecisionCheckResult {
  kPassed,
  kFailed,
  kSkipped,  // it could not run
  kDropped,  // a check not started or not finished: the CPU was busy
};
absl::string_view PrecisionCheckResultName(PrecisionCheckResult result);

// Which accuracy check it was (infergate_precision_checks_total's kind).
enum class PrecisionCheckKind {
  kCheck,    // the check before a dtype serves, once per model file, device and dtype
  kRunning,  // the re-run in FP32 of a request already answered (running_check_every)
};
absl::string_view PrecisionCheckKindName(PrecisionCheckKind kind);

}  // namespace infergate
