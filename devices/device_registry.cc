#include "devices/device_registry.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "devices/logging.h"
#include "devices/system_info.h"
#include "devices/torch_probe.h"

namespace infergate {
namespace {

std::vector<DType> AllDTypes() { return {std::begin(kAllDTypes), std::end(kAllDTypes)}; }

DeviceInfo CpuDevice() {
  DeviceInfo cpu;
  cpu.id = {DeviceKind::kCpu, 0};
  cpu.name = CpuModelName();
  cpu.logical_cores = LogicalCores();
  cpu.supported_dtypes = AllDTypes();
  cpu.precision.kind = DeviceKind::kCpu;
  HostMemory mem = ReadHostMemory();
  cpu.memory_total_bytes = mem.total_bytes;
  cpu.memory_used_bytes = mem.used_bytes;
  return cpu;
}

void LogDevice(const DeviceInfo& d) {
  LOG_INFO << "device " << d.id.ToString() << ": " << d.name << (d.simulated ? " (simulated)" : "")
           << (d.backend_detail.empty() ? "" : " backend=" + d.backend_detail)
           << " compiled_in=" << d.compiled_in << " available=" << d.available
           << " memory_total_bytes=" << d.memory_total_bytes
           << (d.logical_cores ? " logical_cores=" + std::to_string(d.logical_cores) : "");
}

}  // namespace

DeviceRegistry DeviceRegistry::Discover() {
  std::vector<DeviceInfo> devices;
  TorchAccelerators acc = ProbeTorchAccelerators();
  for (int i = 0; i < acc.cuda_device_count; ++i) {
    DeviceInfo d;
    d.id = {DeviceKind::kCuda, i};
    d.name = absl::StrCat(acc.is_rocm ? "ROCm" : "CUDA", " device ", i);
    d.backend_detail = acc.is_rocm ? "rocm" : "";
    d.supported_dtypes = AllDTypes();
    d.precision.kind = DeviceKind::kCuda;
    devices.push_back(std::move(d));
  }
  if (acc.mps_available) {
    DeviceInfo d;
    d.id = {DeviceKind::kMps, 0};
    d.name = "Apple MPS";
    d.supported_dtypes = AllDTypes();
    std::erase(d.supported_dtypes, DType::kFloat64);
    d.precision.kind = DeviceKind::kMps;
    devices.push_back(std::move(d));
  }
  devices.push_back(CpuDevice());
  LOG_INFO << "LibTorch " << TorchVersion() << ": cuda compiled_in=" << acc.cuda_compiled_in
           << " devices=" << acc.cuda_device_count << ", mps compiled_in=" << acc.mps_compiled_in
           << " available=" << acc.mps_available;
  for (const DeviceInfo& d : devices) LogDevice(d);
  return DeviceRegistry(std::move(devices));
}

DeviceRegistry::DeviceRegistry(std::vector<DeviceInfo> devices) : devices_(std::move(devices)) {}

DeviceRegistry::DeviceRegistry(DeviceRegistry&& other) noexcept {
  std::lock_guard<std::mutex> lock(other.mu_);
  devices_ = std::move(other.devices_);
}

std::vector<DeviceInfo> DeviceRegistry::Snapshot() const {
  HostMemory mem = ReadHostMemory();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<DeviceInfo> out = devices_;
  for (DeviceInfo& d : out) {
    if (d.id.kind == DeviceKind::kCpu && !d.simulated) {
      d.memory_total_bytes = mem.total_bytes;
      d.memory_used_bytes = mem.used_bytes;
    }
  }
  return out;
}

std::optional<DeviceInfo> DeviceRegistry::Find(const DeviceId& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const DeviceInfo& d : devices_) {
    if (d.id == id) return d;
  }
  return std::nullopt;
}

std::vector<DeviceId> DeviceRegistry::Available() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<DeviceId> out;
  for (const DeviceInfo& d : devices_) {
    if (d.available) out.push_back(d.id);
  }
  return out;
}

absl::StatusOr<DeviceResolution> DeviceRegistry::Resolve(const DeviceRequest& request,
                                                         bool allow_fallback) const {
  std::vector<DeviceId> available = Available();
  DeviceResolution res;
  if (request.automatic) {
    if (available.empty()) return absl::UnavailableError("device: no device is available");
    res.device = available.front();
    return res;
  }
  for (const DeviceId& id : available) {
    if (id.kind == request.kind && (request.any_index || id.index == request.index)) {
      res.device = id;
      return res;
    }
  }
  std::string wanted = request.ToString();
  if (!allow_fallback) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device: requested device '", wanted, "' is not available on this server and fallback is DENY"));
  }
  LOG_WARNING << "requested device " << wanted << " is not available; falling back to cpu";
  res.device = {DeviceKind::kCpu, 0};
  res.fell_back = true;
  res.fallback_reason = absl::StrCat("device_unavailable:", wanted);
  return res;
}

}  // namespace infergate
