#include "scheduler/routing/failure_policy.h"

#include "devices/device_failure.h"

namespace infergate {

FailureDecision DecideOnFailure(const absl::Status& failure, const DeviceId& device, bool oom_retried) {
  std::optional<DeviceFailureInfo> info = DeviceFailureOf(failure);
  if (failure.ok() || !info || device.kind == DeviceKind::kCpu) return {};
  switch (info->kind) {
    case DeviceFailure::kUnsupportedOp:
      return {FailureAction::kRememberAndFallBack, FallbackReason{FallbackKind::kUnsupportedOp, info->detail}};
    case DeviceFailure::kNoCompiledVariant:
      return {FailureAction::kRememberAndFallBack, FallbackReason{FallbackKind::kNoCompiledVariant, info->detail}};
    case DeviceFailure::kDtype:
      return {FailureAction::kRememberAndFallBack, FallbackReason{FallbackKind::kDtype, info->detail}};
    case DeviceFailure::kOutOfMemory:
      if (!oom_retried) return {FailureAction::kEvictAndRetry, std::nullopt};
      return {FailureAction::kFallBack, FallbackReason{FallbackKind::kOutOfMemory, ""}};
    case DeviceFailure::kTooLarge:  // evicting cannot help: straight to the cpu
      return {FailureAction::kFallBack, FallbackReason{FallbackKind::kOutOfMemory, ""}};
    case DeviceFailure::kDeviceError:
      return {FailureAction::kTakeOutOfService, FallbackReason{FallbackKind::kDeviceError, device.ToString()}};
  }
  return {};
}

}  // namespace infergate
