#include "devices/precision.h"

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace infergate {

absl::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kAuto: return "AUTO";
    case Precision::kFp32: return "FP32";
    case Precision::kFp16: return "FP16";
    case Precision::kBf16: return "BF16";
  }
  return "UNKNOWN";
}

std::optional<Precision> ParsePrecisionName(absl::string_view text) {
  if (text.empty()) return Precision::kAuto;
  for (Precision p : {Precision::kAuto, Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
    if (absl::EqualsIgnoreCase(text, PrecisionName(p))) return p;
  }
  return std::nullopt;
}

bool SupportsBf16(const PrecisionTraits& device) {
  switch (device.kind) {
    case DeviceKind::kCpu: return true;
    case DeviceKind::kCuda: return device.compute_capability >= 80;
    case DeviceKind::kMps: return device.macos_major >= 14;
  }
  return false;
}

Precision DefaultPrecision(const PrecisionTraits& device) {
  switch (device.kind) {
    case DeviceKind::kCpu: return Precision::kFp32;
    case DeviceKind::kCuda: return SupportsBf16(device) ? Precision::kBf16 : Precision::kFp16;
    case DeviceKind::kMps: return Precision::kFp16;
  }
  return Precision::kFp32;
}

DType ResolveComputeDType(const PrecisionTraits& device, Precision requested, Precision model_override,
                          bool model_is_float64) {
  Precision p = requested != Precision::kAuto ? requested : model_override;
  // A float64 model asked for nothing: keep float64 where the device has it,
  // else the nearest type MPS has.
  if (p == Precision::kAuto && model_is_float64) {
    return device.kind == DeviceKind::kMps ? DType::kFloat32 : DType::kFloat64;
  }
  if (p == Precision::kAuto) p = DefaultPrecision(device);
  if (p == Precision::kBf16 && !SupportsBf16(device)) p = Precision::kFp16;
  return PrecisionDType(p).value_or(DType::kFloat32);
}

std::optional<DType> PrecisionDType(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return DType::kFloat32;
    case Precision::kFp16: return DType::kFloat16;
    case Precision::kBf16: return DType::kBFloat16;
    case Precision::kAuto: break;
  }
  return std::nullopt;
}

DType CastTarget(DType tensor, DType compute) { return IsFloatingPoint(tensor) ? compute : tensor; }

}  // namespace infergate
