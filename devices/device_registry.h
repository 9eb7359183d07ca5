#pragma once
// The thread-safe set of devices the server may place work on, discovered once
// at start; memory figures are refreshed when read.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "devices/device_id.h"
#include "devices/device_info.h"
#include "devices/simulation.h"

namespace infergate {

struct DiscoveryOptions {
  // Operator allow-list (--devices); empty allows every device. The CPU is
  // always kept: it is where fallbacks run.
  std::vector<DeviceRequest> allow;
  std::vector<SimulatedDeviceSpec> simulated;
  std::vector<std::string> mps_unsupported_ops = DefaultMpsUnsupportedOps();
  std::string nvml_library = "libnvidia-ml.so.1";
  // Fault injection for simulated devices: these fail every run after
  // `fail_after_runs` runs.
  std::vector<DeviceId> failing;
  int64_t fail_after_runs = 0;
};

// Parses --devices: "cpu", "cpu,cuda:1", "cuda,mps". Errors name the flag.
absl::StatusOr<std::vector<DeviceRequest>> ParseDeviceAllowList(absl::string_view text);

class DeviceRegistry {
 public:
  // Asks the OS, LibTorch and NVML what is present, adds simulated devices,
  // applies the allow-list, and logs one line per device.
  static absl::StatusOr<DeviceRegistry> Discover(const DiscoveryOptions& options);

  // Devices in cold-start preference order: CUDA, MPS, CPU.
  explicit DeviceRegistry(std::vector<DeviceInfo> devices, std::string nvml_library = "");
  DeviceRegistry(DeviceRegistry&& other) noexcept;

  // Every device with current memory figures.
  std::vector<DeviceInfo> Snapshot() const;
  std::optional<DeviceInfo> Find(const DeviceId& id) const;
  // What Find(id)->precision says, without copying the rest.
  std::optional<PrecisionTraits> PrecisionOf(const DeviceId& id) const;
  // Available devices, in preference order.
  std::vector<DeviceId> Available() const;

  // True while a device that failed is cooling down (see MarkUnhealthy).
  bool OutOfService(const DeviceId& id) const;

  // Takes a device out of service until `until` after it failed (never the
  // CPU): routing skips it and explicit requests fall back.
  void MarkUnhealthy(const DeviceId& id, std::chrono::steady_clock::time_point until);

 private:
  mutable Mutex mu_;
  std::vector<DeviceInfo> devices_ ABSL_GUARDED_BY(mu_);
  std::map<DeviceId, std::chrono::steady_clock::time_point> down_until_ ABSL_GUARDED_BY(mu_);
  bool Down(const DeviceId& id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string nvml_library_;
};

}  // namespace infergate
