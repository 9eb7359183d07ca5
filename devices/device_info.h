#pragma once
// What the server knows about one device: identity, capabilities, figures.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "devices/device_id.h"
#include "devices/dtype.h"
#include "devices/precision.h"
#include "devices/simulation.h"

namespace infergate {

struct DeviceInfo {
  DeviceId id;
  std::string name;
  bool compiled_in = true;  // the LibTorch build supports this kind
  bool available = true;    // usable right now
  bool simulated = false;
  std::string backend_detail;  // "rocm" for a ROCm build presenting as cuda
  std::vector<DType> supported_dtypes;
  PrecisionTraits precision;
  uint64_t memory_total_bytes = 0;
  uint64_t memory_used_bytes = 0;
  uint64_t memory_peak_bytes = 0;  // highest memory_used_bytes seen; simulated devices only
  unsigned logical_cores = 0;      // CPU only
  std::string compute_capability;  // "8.6" for CUDA when known
  // Set for simulated devices: the rules their runs enforce.
  std::shared_ptr<const SimulationRules> simulation;
};

}  // namespace infergate
