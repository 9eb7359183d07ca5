#pragma once
// Device identities ("cpu", "cuda:0", "mps") and parsing of a client's device
// request string.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

enum class DeviceKind { kCpu, kCuda, kMps };

absl::string_view DeviceKindName(DeviceKind kind);  // "cpu", "cuda", "mps"

// A concrete device: kind plus index (always 0 for cpu and mps).
struct DeviceId {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;

  std::string ToString() const;  // "cpu", "cuda:1", "mps"
  friend bool operator==(const DeviceId&, const DeviceId&) = default;
  friend auto operator<=>(const DeviceId&, const DeviceId&) = default;
};

// The host's CPU: always present, where fallbacks and accuracy references run.
inline constexpr DeviceId kCpuDevice{DeviceKind::kCpu, 0};

// What a client asked for. `any_index` is set for a bare "cuda".
struct DeviceRequest {
  bool automatic = true;  // "" or "auto"
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  bool any_index = false;

  std::string ToString() const;  // canonical form: "auto", "cuda", "cuda:2"
};

// Accepts "", "auto", "cpu", "cuda", "cuda:N", "mps" (case-insensitive,
// surrounding blanks ignored). Anything else is INVALID_ARGUMENT naming
// `field` and the offending string.
absl::StatusOr<DeviceRequest> ParseDeviceRequest(absl::string_view text, absl::string_view field = "device");

}  // namespace infergate
