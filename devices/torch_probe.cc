#include "devices/torch_probe.h"

#include <ATen/Context.h>
#include <ATen/Version.h>
#include <torch/cuda.h>
#include <torch/version.h>

namespace infergate {

TorchAccelerators ProbeTorchAccelerators() {
  TorchAccelerators acc;
  acc.cuda_compiled_in = at::hasCUDA() || at::hasHIP();
  acc.is_rocm = at::hasHIP();
  acc.cuda_device_count = acc.cuda_compiled_in ? static_cast<int>(torch::cuda::device_count()) : 0;
  acc.mps_available = at::hasMPS();
#if defined(__APPLE__)
  acc.mps_compiled_in = true;
#else
  acc.mps_compiled_in = acc.mps_available;
#endif
  return acc;
}

std::string TorchVersion() { return TORCH_VERSION; }

}  // namespace infergate
