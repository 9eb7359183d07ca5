#include "devices/tensor_placement.h"

#include "devices/torch_dtype.h"

namespace infergate {

TensorPlacement PlanPlacement(const DeviceInfo& device, DType compute) {
  TensorPlacement p;
  if (!device.simulated) {
    switch (device.id.kind) {
      case DeviceKind::kCuda:
        p.device = c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device.id.index));
        break;
      case DeviceKind::kMps: p.device = c10::Device(c10::DeviceType::MPS); break;
      case DeviceKind::kCpu: break;
    }
  }
  p.dtype = ToScalarType(compute);
  return p;
}

at::Tensor Place(const at::Tensor& t, const TensorPlacement& p) {
  if (!t.is_floating_point()) return t.to(p.device);
  return t.to(p.device, p.dtype);
}

}  // namespace infergate
