#include "devices/worker_stream.h"

#include <c10/core/impl/VirtualGuardImpl.h>

#include <exception>

#include "absl/strings/str_cat.h"
#include "devices/tensor_placement.h"

namespace infergate {

absl::Status UseOwnStream(const DeviceInfo& device) {
  if (device.simulated || device.id.kind == DeviceKind::kCpu) return absl::OkStatus();
  const c10::Device torch_device = PlanPlacement(device, DType::kFloat32).device;
  try {
    c10::impl::VirtualGuardImpl backend(torch_device.type());
    backend.exchangeStream(backend.getStreamFromGlobalPool(torch_device, /*isHighPriority=*/false));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(device.id.ToString(), ": no stream of its own for this worker (",
                                               e.what(), "); it uses the device's default stream"));
  }
}

}  // namespace infergate
