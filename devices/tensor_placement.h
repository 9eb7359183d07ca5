#pragma once
// How tensors are moved and cast onto a device for one compute dtype.

#include <ATen/core/Tensor.h>

#include "devices/device_info.h"
#include "devices/dtype.h"

namespace infergate {

struct TensorPlacement {
  c10::Device device{c10::DeviceType::CPU};  // where tensors live; the CPU for simulated devices
  // Floating tensors are cast to this and the model computes in it, on real
  // and simulated devices alike (LibTorch 2.x's CPU backend runs fp16 and
  // bf16 arithmetic itself, so a simulated device's answers are the reduced
  // precision's own, overflow included).
  c10::ScalarType dtype = c10::ScalarType::Float;
};

TensorPlacement PlanPlacement(const DeviceInfo& device, DType compute);

// Moves `t` to the placement's device; floating tensors are cast to its
// dtype, others keep their dtype.
at::Tensor Place(const at::Tensor& t, const TensorPlacement& placement);

}  // namespace infergate
