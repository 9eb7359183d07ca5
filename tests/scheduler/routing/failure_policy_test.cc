// The failure policy as a table: failure kind x device x retried.

#include "scheduler/routing/failure_policy.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "devices/device_failure.h"

namespace infergate {
namespace {

TEST(FailurePolicy, EveryFailureKindOnEveryDevice) {
  const DeviceId cpu{DeviceKind::kCpu, 0}, cuda{DeviceKind::kCuda, 1}, mps{DeviceKind::kMps, 0};
  const absl::Status plain = absl::InternalError("the model raised ValueError");
  const absl::Status op =
      WithDeviceFailure(absl::UnimplementedError("no op"), DeviceFailure::kUnsupportedOp, "aten::fft_r2c");
  const absl::Status dtype = WithDeviceFailure(absl::InvalidArgumentError("float64"), DeviceFailure::kDtype, "float64");
  const absl::Status oom = WithDeviceFailure(absl::ResourceExhaustedError("oom"), DeviceFailure::kOutOfMemory, "");
  const absl::Status lost = WithDeviceFailure(absl::InternalError("CUDA error"), DeviceFailure::kDeviceError, "");
  using A = FailureAction;
  using K = FallbackKind;
  struct Row {
    const absl::Status* failure;
    DeviceId device;
    bool oom_retried;
    FailureDecision expected;
  };
  const Row rows[] = {
      {&plain, cuda, false, {A::kFail, std::nullopt}},
      {&plain, cpu, false, {A::kFail, std::nullopt}},
      {&op, mps, false, {A::kRememberAndFallBack, FallbackReason{K::kUnsupportedOp, "aten::fft_r2c"}}},
      {&op, cpu, false, {A::kFail, std::nullopt}},
      {&dtype, mps, false, {A::kRememberAndFallBack, FallbackReason{K::kDtype, "float64"}}},
      {&oom, cuda, false, {A::kEvictAndRetry, std::nullopt}},
      {&oom, cuda, true, {A::kFallBack, FallbackReason{K::kOutOfMemory, ""}}},
      {&oom, cpu, false, {A::kFail, std::nullopt}},
      {&lost, cuda, false, {A::kTakeOutOfService, FallbackReason{K::kDeviceError, "cuda:1"}}},
      {&lost, cpu, false, {A::kFail, std::nullopt}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(
        absl::StrCat(row.failure->ToString(), " on ", row.device.ToString(), row.oom_retried ? " (retried)" : ""));
    EXPECT_EQ(DecideOnFailure(*row.failure, row.device, row.oom_retried), row.expected);
  }
}

}  // namespace
}  // namespace infergate
