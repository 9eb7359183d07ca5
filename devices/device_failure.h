#pragma once
// Failures a device raises that the scheduler can act on (retry elsewhere,
// evict and retry), carried on an absl::Status as a payload so the status
// code and message stay what the client should see.

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace infergate {

enum class DeviceFailure {
  kUnsupportedOp,      // c10::NotImplementedError for the device; detail "aten::op"
  kDtype,              // c10::TypeError: a dtype the device cannot hold; detail "float64"
  kOutOfMemory,        // c10::OutOfMemoryError
  kDeviceError,        // the device itself failed ("CUDA error: ..."); detail: the device id
  kTooLarge,           // the model alone exceeds the device's model cache budget: it can never be loaded there
  kNoCompiledVariant,  // an ahead-of-time compiled model (.pt2) has no build for the device; detail: its kind
};

struct DeviceFailureInfo {
  DeviceFailure kind;
  std::string detail;
};

absl::Status WithDeviceFailure(absl::Status status, DeviceFailure kind, absl::string_view detail);
std::optional<DeviceFailureInfo> DeviceFailureOf(const absl::Status& status);

// Pulls "aten::op" out of LibTorch's "The operator 'aten::op' is not
// currently implemented for the MPS device" message; "" if absent.
std::string UnsupportedOpFromMessage(absl::string_view message);

}  // namespace infergate
