#include "devices/device_registry.h"

#include <algorithm>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "devices/macos.h"
#include "devices/nvml.h"
#include "devices/system_info.h"
#include "devices/torch_probe.h"

namespace infergate {
namespace {

std::vector<DType> AllDTypes() { return {std::begin(kAllDTypes), std::end(kAllDTypes)}; }

// What a device kind can hold: MPS has no float64, and bf16 needs the
// capability the precision policy checks.
std::vector<DType> SupportedDTypes(const PrecisionTraits& traits) {
  std::vector<DType> out = AllDTypes();
  if (traits.kind == DeviceKind::kMps) std::erase(out, DType::kFloat64);
  if (!SupportsBf16(traits)) std::erase(out, DType::kBFloat16);
  return out;
}

DeviceInfo CpuDevice() {
  DeviceInfo cpu;
  cpu.id = {DeviceKind::kCpu, 0};
  cpu.name = CpuModelName();
  cpu.logical_cores = LogicalCores();
  cpu.precision.kind = DeviceKind::kCpu;
  cpu.supported_dtypes = SupportedDTypes(cpu.precision);
  HostMemory mem = ReadHostMemory();
  cpu.memory_total_bytes = mem.total_bytes;
  cpu.memory_used_bytes = mem.used_bytes;
  return cpu;
}

std::string CapabilityText(int cc) { return cc > 0 ? absl::StrCat(cc / 10, ".", cc % 10) : ""; }

// CUDA index -> NVML index. NVML counts in PCI bus order; CUDA honours
// CUDA_VISIBLE_DEVICES (and, with CUDA_DEVICE_ORDER=PCI_BUS_ID, the same order).
int NvmlIndexFor(int cuda_index) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!visible || !*visible) return cuda_index;
  std::vector<std::string> ids = absl::StrSplit(visible, ',');
  int n = -1;
  if (cuda_index < static_cast<int>(ids.size()) && absl::SimpleAtoi(ids[cuda_index], &n)) return n;
  return -1;  // UUIDs or malformed: no mapping
}

void LogDevice(const DeviceInfo& d) {
  LOG_INFO << "device " << d.id.ToString() << ": " << d.name << (d.simulated ? " (simulated)" : "")
           << (d.backend_detail.empty() ? "" : " backend=" + d.backend_detail) << " compiled_in=" << d.compiled_in
           << " available=" << d.available << " memory_total_bytes=" << d.memory_total_bytes
           << (d.logical_cores ? " logical_cores=" + std::to_string(d.logical_cores) : "")
           << (d.compute_capability.empty() ? "" : " compute_capability=" + d.compute_capability)
           << (d.precision.macos_major ? " macos=" + std::to_string(d.precision.macos_major) : "")
           << " default_precision=" << PrecisionName(DefaultPrecision(d.precision));
}

bool Allowed(const std::vector<DeviceRequest>& allow, const DeviceId& id) {
  if (allow.empty() || id.kind == DeviceKind::kCpu) return true;
  for (const DeviceRequest& r : allow) {
    if (r.kind == id.kind && (r.any_index || r.index == id.index || id.kind != DeviceKind::kCuda)) return true;
  }
  return false;
}

DeviceInfo SimulatedDevice(const SimulatedDeviceSpec& spec, const DiscoveryOptions& options) {
  DeviceInfo d;
  d.id = spec.id;
  d.simulated = true;
  d.precision.kind = spec.id.kind;
  auto rules = std::make_shared<SimulationRules>();
  rules->device = spec.id;
  rules->memory = std::make_shared<MemoryLedger>(spec.memory_bytes);
  const bool cuda = spec.id.kind == DeviceKind::kCuda;
  rules->transfer_bytes_per_second = spec.transfer_bytes_per_second > 0 ? spec.transfer_bytes_per_second
                                     : cuda                             ? kSimulatedCudaBytesPerSecond
                                                                        : kSimulatedMpsBytesPerSecond;
  rules->transfer_latency = spec.transfer_latency.count() >= 0 ? spec.transfer_latency
                            : cuda                             ? kSimulatedCudaTransferLatency
                                                               : kSimulatedMpsTransferLatency;
  rules->link = std::make_shared<SimulatedLink>(rules->transfer_bytes_per_second, rules->transfer_latency);
  rules->compute_scale = spec.compute_scale;
  if (spec.id.kind == DeviceKind::kCuda) {
    d.precision.compute_capability = spec.compute_capability;
    d.compute_capability = CapabilityText(spec.compute_capability);
    d.name = absl::StrCat("Simulated CUDA device ", spec.id.index, " (compute capability ", d.compute_capability, ")");
  } else {
    d.precision.macos_major = spec.macos_major;
    d.name = absl::StrCat("Simulated Apple MPS (macOS ", spec.macos_major, ")");
    rules->reject_float64 = true;
    for (const std::string& op : options.mps_unsupported_ops) rules->unsupported_ops.insert(OpBaseName(op));
  }
  for (const DeviceId& id : options.failing) {
    if (id == spec.id) rules->fail_after_runs = options.fail_after_runs;
  }
  d.supported_dtypes = SupportedDTypes(d.precision);
  d.memory_total_bytes = spec.memory_bytes;
  d.simulation = std::move(rules);
  return d;
}

}  // namespace

absl::StatusOr<std::vector<DeviceRequest>> ParseDeviceAllowList(absl::string_view text) {
  std::vector<DeviceRequest> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    ASSIGN_OR_RETURN(DeviceRequest r, ParseDeviceRequest(item, "--devices"));
    if (r.automatic) return absl::InvalidArgumentError("--devices: list devices, not 'auto'");
    out.push_back(r);
  }
  return out;
}

absl::StatusOr<DeviceRegistry> DeviceRegistry::Discover(const DiscoveryOptions& options) {
  std::vector<DeviceInfo> devices;
  TorchAccelerators acc = ProbeTorchAccelerators();
  absl::StatusOr<std::vector<NvmlDevice>> nvml = std::vector<NvmlDevice>{};
  if (acc.cuda_device_count > 0 && !acc.is_rocm) {
    nvml = ReadNvmlDevices(options.nvml_library);
    if (!nvml.ok()) LOG_WARNING << "CUDA devices present but " << nvml.status().message();
  }
  for (int i = 0; i < acc.cuda_device_count; ++i) {
    DeviceInfo d;
    d.id = {DeviceKind::kCuda, i};
    d.name = absl::StrCat(acc.is_rocm ? "ROCm" : "CUDA", " device ", i);
    d.backend_detail = acc.is_rocm ? "rocm" : "";
    d.precision.kind = DeviceKind::kCuda;
    int n = NvmlIndexFor(i);
    if (nvml.ok() && n >= 0 && n < static_cast<int>(nvml->size())) {
      const NvmlDevice& info = (*nvml)[n];
      if (!info.name.empty()) d.name = info.name;
      d.memory_total_bytes = info.memory_total_bytes;
      d.memory_used_bytes = info.memory_used_bytes;
      d.precision.compute_capability = info.cc_major * 10 + info.cc_minor;
      d.compute_capability = CapabilityText(d.precision.compute_capability);
    }
    d.supported_dtypes = SupportedDTypes(d.precision);
    devices.push_back(std::move(d));
  }
  if (acc.mps_available) {
    DeviceInfo d;
    d.id = {DeviceKind::kMps, 0};
    d.name = "Apple MPS";
    d.precision.kind = DeviceKind::kMps;
    d.precision.macos_major = MacosMajorVersion();
    d.supported_dtypes = SupportedDTypes(d.precision);
    HostMemory mem = ReadHostMemory();  // unified memory
    d.memory_total_bytes = mem.total_bytes;
    devices.push_back(std::move(d));
  }
  for (const SimulatedDeviceSpec& spec : options.simulated) {
    for (const DeviceInfo& d : devices) {
      if (d.id == spec.id) {
        return absl::InvalidArgumentError(
            absl::StrCat("--simulate-devices: ", spec.id.ToString(), " is a real device on this machine"));
      }
    }
    devices.push_back(SimulatedDevice(spec, options));
  }
  // Cold-start preference: CUDA (by index), then MPS; the CPU goes last.
  auto rank = [](const DeviceInfo& d) { return std::pair(d.id.kind == DeviceKind::kCuda ? 0 : 1, d.id.index); };
  std::stable_sort(devices.begin(), devices.end(),
                   [&](const DeviceInfo& a, const DeviceInfo& b) { return rank(a) < rank(b); });
  std::vector<DeviceInfo> kept;
  for (DeviceInfo& d : devices) {
    if (Allowed(options.allow, d.id)) {
      kept.push_back(std::move(d));
    } else {
      LOG_INFO << "device " << d.id.ToString() << " hidden by --devices";
    }
  }
  kept.push_back(CpuDevice());
  LOG_INFO << "LibTorch " << TorchVersion() << ": cuda compiled_in=" << acc.cuda_compiled_in
           << " devices=" << acc.cuda_device_count << (acc.is_rocm ? " (rocm)" : "")
           << ", mps compiled_in=" << acc.mps_compiled_in << " available=" << acc.mps_available;
  for (const DeviceInfo& d : kept) LogDevice(d);
  return DeviceRegistry(std::move(kept), options.nvml_library);
}

DeviceRegistry::DeviceRegistry(std::vector<DeviceInfo> devices, std::string nvml_library)
    : devices_(std::move(devices)), nvml_library_(std::move(nvml_library)) {}

DeviceRegistry::DeviceRegistry(DeviceRegistry&& other) noexcept {
  MutexLock lock(other.mu_);
  devices_ = std::move(other.devices_);
  nvml_library_ = std::move(other.nvml_library_);
}

void DeviceRegistry::MarkUnhealthy(const DeviceId& id, std::chrono::steady_clock::time_point until) {
  if (id.kind == DeviceKind::kCpu) return;
  MutexLock lock(mu_);
  down_until_[id] = until;
}

bool DeviceRegistry::Down(const DeviceId& id) const {
  auto it = down_until_.find(id);
  return it != down_until_.end() && std::chrono::steady_clock::now() < it->second;
}

std::vector<DeviceInfo> DeviceRegistry::Snapshot() const {
  HostMemory mem = ReadHostMemory();
  std::vector<DeviceInfo> out;
  {
    MutexLock lock(mu_);
    out = devices_;
    for (DeviceInfo& d : out) d.available = d.available && !Down(d.id);
  }
  bool has_real_cuda = false;
  for (const DeviceInfo& d : out) has_real_cuda |= d.id.kind == DeviceKind::kCuda && !d.simulated;
  absl::StatusOr<std::vector<NvmlDevice>> nvml = std::vector<NvmlDevice>{};
  if (has_real_cuda && !nvml_library_.empty()) nvml = ReadNvmlDevices(nvml_library_);
  for (DeviceInfo& d : out) {
    if (d.simulation && d.simulation->memory) {
      d.memory_used_bytes = d.simulation->memory->used();
      d.memory_peak_bytes = d.simulation->memory->peak();
    } else if (d.id.kind == DeviceKind::kCpu) {
      d.memory_total_bytes = mem.total_bytes;
      d.memory_used_bytes = mem.used_bytes;
    } else if (d.id.kind == DeviceKind::kMps) {
      d.memory_used_bytes = mem.used_bytes;
    } else if (d.id.kind == DeviceKind::kCuda && nvml.ok()) {
      int n = NvmlIndexFor(d.id.index);
      if (n >= 0 && n < static_cast<int>(nvml->size())) d.memory_used_bytes = (*nvml)[n].memory_used_bytes;
    }
  }
  return out;
}

std::optional<DeviceInfo> DeviceRegistry::Find(const DeviceId& id) const {
  MutexLock lock(mu_);
  for (const DeviceInfo& d : devices_) {
    if (d.id == id) {
      DeviceInfo copy = d;
      copy.available = d.available && !Down(d.id);
      return copy;
    }
  }
  return std::nullopt;
}

std::optional<PrecisionTraits> DeviceRegistry::PrecisionOf(const DeviceId& id) const {
  MutexLock lock(mu_);
  for (const DeviceInfo& d : devices_) {
    if (d.id == id) return d.precision;
  }
  return std::nullopt;
}

std::vector<DeviceId> DeviceRegistry::Available() const {
  MutexLock lock(mu_);
  std::vector<DeviceId> out;
  for (const DeviceInfo& d : devices_) {
    if (d.available && !Down(d.id)) out.push_back(d.id);
  }
  return out;
}

bool DeviceRegistry::OutOfService(const DeviceId& id) const {
  MutexLock lock(mu_);
  return Down(id);
}

}  // namespace infergate
