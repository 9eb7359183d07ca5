#include "devices/simulation.h"

#include <algorithm>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/units.h"

namespace infergate {

bool MemoryLedger::TryReserve(uint64_t bytes) {
  uint64_t cur = used_.load(std::memory_order_relaxed);
  do {
    if (cur + bytes > capacity_ || cur + bytes < cur) return false;
  } while (!used_.compare_exchange_weak(cur, cur + bytes, std::memory_order_relaxed));
  uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (cur + bytes > peak && !peak_.compare_exchange_weak(peak, cur + bytes, std::memory_order_relaxed)) {
  }
  return true;
}

void MemoryLedger::Release(uint64_t bytes) {
  uint64_t cur = used_.load(std::memory_order_relaxed);
  while (!used_.compare_exchange_weak(cur, cur >= bytes ? cur - bytes : 0, std::memory_order_relaxed)) {
  }
}

std::chrono::microseconds SimulatedTransferTime(const SimulationRules& rules, uint64_t bytes) {
  return LinkTransferTime(rules.transfer_bytes_per_second, rules.transfer_latency, bytes);
}

std::chrono::microseconds SimulatedMove(const SimulationRules& rules, uint64_t bytes) {
  if (rules.link) return rules.link->Move(bytes);
  const std::chrono::microseconds alone = SimulatedTransferTime(rules, bytes);
  std::this_thread::sleep_for(alone);
  return alone;
}

double SimulatedCpuExtraUs(double wall_us, double least_work_us, double factor) {
  if (factor <= 1) return 0;
  return std::max(0.0, least_work_us * factor - wall_us);
}

std::chrono::microseconds SimulatedLinkQueue(const SimulationRules& rules) {
  return rules.link ? rules.link->Queued() : std::chrono::microseconds(0);
}

absl::StatusOr<std::vector<SimulatedDeviceSpec>> ParseSimulatedDevices(absl::string_view text) {
  std::vector<SimulatedDeviceSpec> out;
  for (absl::string_view entry : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("--simulate-devices: entry '", entry, "': ", why));
    };
    // A transfer or compute setting of the device listed before it.
    if (absl::StartsWith(entry, "bandwidth=") || absl::StartsWith(entry, "transfer_latency=") ||
        absl::StartsWith(entry, "compute_scale=")) {
      if (out.empty()) return bad("names no device: list it after the device it sets (cuda:0,bandwidth=12GB/s)");
      absl::string_view value = entry.substr(entry.find('=') + 1);
      if (absl::StartsWith(entry, "compute_scale=")) {
        double scale = 0;
        if (!absl::SimpleAtod(value, &scale) || !(scale > 0 && scale <= 1000)) {
          return bad("expected a number above 0 and at most 1000: the device's time over the host thread's CPU time");
        }
        out.back().compute_scale = scale;
      } else if (absl::StartsWith(entry, "bandwidth=")) {
        absl::string_view per_second = value;
        if (!absl::ConsumeSuffix(&per_second, "/s")) return bad("expected bytes per second, as 12GB/s");
        absl::StatusOr<uint64_t> bytes = ParseByteSize(per_second);
        if (!bytes.ok()) return bad(bytes.status().message());
        if (*bytes == 0) return bad("the bandwidth must be positive");
        out.back().transfer_bytes_per_second = static_cast<double>(*bytes);
      } else {
        absl::StatusOr<std::chrono::milliseconds> latency = ParseDuration(value, "transfer_latency");
        if (!latency.ok()) return bad(latency.status().message());
        out.back().transfer_latency = *latency;
      }
      continue;
    }
    absl::string_view rest = entry;
    absl::string_view capability;
    if (size_t at = rest.find('@'); at != absl::string_view::npos) {
      capability = rest.substr(at + 1);
      rest = rest.substr(0, at);
    }
    absl::string_view memory;
    if (size_t eq = rest.find('='); eq != absl::string_view::npos) {
      memory = rest.substr(eq + 1);
      rest = rest.substr(0, eq);
    }
    ASSIGN_OR_RETURN(DeviceRequest dev, ParseDeviceRequest(rest, "--simulate-devices"));
    if (dev.automatic || dev.kind == DeviceKind::kCpu) return bad("only cuda:N and mps can be simulated");
    SimulatedDeviceSpec spec;
    spec.id = {dev.kind, dev.kind == DeviceKind::kCuda ? dev.index : 0};
    if (!memory.empty()) {
      absl::StatusOr<uint64_t> bytes = ParseByteSize(memory);
      if (!bytes.ok()) return bad(bytes.status().message());
      if (*bytes == 0) return bad("memory size must be positive");
      spec.memory_bytes = *bytes;
    }
    if (!capability.empty()) {
      double v = 0;
      if (!absl::SimpleAtod(capability, &v) || v <= 0 || v >= 100) {
        return bad("expected @MAJOR.MINOR compute capability (cuda) or @MAJOR macOS version (mps)");
      }
      if (spec.id.kind == DeviceKind::kCuda) {
        spec.compute_capability = static_cast<int>(std::lround(v * 10));
      } else {
        spec.macos_major = static_cast<int>(v);
      }
    }
    for (const SimulatedDeviceSpec& s : out) {
      if (s.id == spec.id) return bad("device listed twice");
    }
    out.push_back(spec);
  }
  return out;
}

std::vector<std::string> DefaultMpsUnsupportedOps() {
  return {"aten::upsample_bicubic2d", "aten::grid_sampler_3d", "aten::max_unpool2d", "aten::linalg_lstsq",
          "aten::_ctc_loss"};
}

std::string OpBaseName(absl::string_view op) {
  op = absl::StripAsciiWhitespace(op);
  size_t colons = op.find("::");
  size_t dot = op.find('.', colons == absl::string_view::npos ? 0 : colons + 2);
  return std::string(op.substr(0, dot));
}

}  // namespace infergate
