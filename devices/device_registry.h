#pragma once
// The thread-safe set of devices the server may place work on, discovered once
// at start; memory figures are refreshed when read.

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devices/device_id.h"
#include "devices/device_info.h"

namespace infergate {

// Where a request goes after the fallback rules.
struct DeviceResolution {
  DeviceId device;
  bool fell_back = false;
  std::string fallback_reason;  // "device_unavailable:cuda:7"
};

class DeviceRegistry {
 public:
  // Asks the OS and LibTorch what is present; logs one line per device.
  static DeviceRegistry Discover();

  // Devices in cold-start preference order: CUDA, MPS, CPU.
  explicit DeviceRegistry(std::vector<DeviceInfo> devices);
  DeviceRegistry(DeviceRegistry&& other) noexcept;

  // Every device with current memory figures.
  std::vector<DeviceInfo> Snapshot() const;
  std::optional<DeviceInfo> Find(const DeviceId& id) const;
  // Available devices, in preference order.
  std::vector<DeviceId> Available() const;

  // Maps a client's request to a present device. "auto" takes the first
  // available device in preference order. A valid request for an absent
  // device falls back to the CPU when `allow_fallback`, else it is
  // FAILED_PRECONDITION.
  absl::StatusOr<DeviceResolution> Resolve(const DeviceRequest& request, bool allow_fallback) const;

 private:
  mutable std::mutex mu_;
  std::vector<DeviceInfo> devices_;
};

}  // namespace infergate
