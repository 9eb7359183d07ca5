#include "devices/torch_probe.h"

#include <ATen/Context.h>
#include <ATen/DeviceAccelerator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/version.h>

namespace infergate {

// LibTorch 2.x's device-generic interfaces: the process's accelerator (at
// most one kind per build: CUDA, HIP, MPS, ...) and its device count from
// that kind's registered device guard, with no backend-specific header.
TorchAccelerators ProbeTorchAccelerators() {
  TorchAccelerators acc;
  const std::optional<c10::DeviceType> accelerator = at::getAccelerator(/*checked=*/false);
  acc.cuda_compiled_in = at::hasCUDA() || at::hasHIP();
  acc.is_rocm = at::hasHIP();
  if (acc.cuda_compiled_in && accelerator && c10::impl::hasDeviceGuardImpl(*accelerator) &&
      (*accelerator == c10::DeviceType::CUDA || *accelerator == c10::DeviceType::HIP)) {
    acc.cuda_device_count = static_cast<int>(c10::impl::getDeviceGuardImpl(*accelerator)->deviceCount());
  }
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
