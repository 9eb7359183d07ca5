#pragma once
// Per-device compute precision policy: which dtype a model runs in, given the
// device, what the client asked for and the model config's override.

#include <optional>

#include "absl/strings/string_view.h"
#include "devices/device_id.h"
#include "devices/dtype.h"

namespace infergate {

enum class Precision { kAuto, kFp32, kFp16, kBf16 };

absl::string_view PrecisionName(Precision p);
// The precision PrecisionName calls `text`, in any letter case; "" is
// AUTO. nullopt for anything else. Every front end reads precision names
// through this.
std::optional<Precision> ParsePrecisionName(absl::string_view text);
// The dtype an explicit precision names; nullopt for AUTO.
std::optional<DType> PrecisionDType(Precision precision);

// Facts about a device that the policy depends on.
struct PrecisionTraits {
  DeviceKind kind = DeviceKind::kCpu;
  // CUDA compute capability as major*10+minor (80 for 8.0); 0 when unknown.
  int compute_capability = 0;
  // macOS major version for MPS; 0 when unknown.
  int macos_major = 0;
};

// The dtype a floating-point model runs in. `requested` is the client's
// precision, `model_override` the model config's; the client wins over the
// model, and both are held to what the device can do (bf16 on CUDA needs
// capability >= 8.0, on MPS macOS 14+; otherwise fp16 is used instead).
// A model that declares float64 inputs keeps float64 when nobody asks for a
// precision and the device has float64; on MPS, which has none, it runs in
// float32. AUTO never drops a double-precision model to 16 bits.
DType ResolveComputeDType(const PrecisionTraits& device, Precision requested, Precision model_override,
                          bool model_is_float64 = false);

// Precision used when neither client nor model asks for one.
Precision DefaultPrecision(const PrecisionTraits& device);

bool SupportsBf16(const PrecisionTraits& device);

// The dtype a tensor (parameter, buffer or input) is converted to before it
// reaches the device: floating tensors take the compute dtype, integer and
// bool tensors are never cast. Since the compute dtype is never float64 on
// MPS, this is also where float64 is normalised away for MPS.
DType CastTarget(DType tensor, DType compute);

}  // namespace infergate
