#pragma once
// What the scheduler does when a device fails a request: a pure function
// from the failure to an action, so the policy reads (and is tested) as one
// table rather than as branches spread over the execution code.
//
//   failure (payload)        on an accelerator               on the cpu
//   none (model's own)       fail the request                fail
//   unsupported op / dtype   remember for the model, to cpu  fail
//   out of memory            evict idle models, retry once;  fail
//                            then to cpu
//   too large for budget     to cpu                          fail
//   device error             take device out of service,     fail
//                            to cpu

#include <optional>

#include "absl/status/status.h"
#include "devices/device_id.h"
#include "scheduler/model/fallback_reason.h"

namespace infergate {

enum class FailureAction {
  kFail,                 // answer the client with the failure as it is
  kEvictAndRetry,        // make room on the device and run again there
  kFallBack,             // run on the cpu instead
  kRememberAndFallBack,  // also route the model's later requests for this device kind to the cpu
  kTakeOutOfService,     // stop routing to the device for a while, and run on the cpu
};

struct FailureDecision {
  FailureAction action = FailureAction::kFail;
  std::optional<FallbackReason> reason;  // set for every action that moves work to the cpu
  friend bool operator==(const FailureDecision&, const FailureDecision&) = default;
};

// `oom_retried`: this batch already made room once after running out of memory.
FailureDecision DecideOnFailure(const absl::Status& failure, const DeviceId& device, bool oom_retried);

}  // namespace infergate
