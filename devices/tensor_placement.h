#pragma once
// How tensors are moved and cast onto a device for one compute dtype.

#include <ATen/core/Tensor.h>

#include "devices/device_info.h"
#include "devices/dtype.h"

namespace infergate {

struct TensorPlacement {
  c10::Device device{c10::DeviceType::CPU};  // where tensors live; the CPU for simulated devices
  c10::ScalarType storage = c10::ScalarType::Float;     // floating values are rounded to this
  c10::ScalarType arithmetic = c10::ScalarType::Float;  // and held in this while the model runs

  // True when fp16 is emulated: LibTorch 1.13's CPU backend has no fp16
  // matmul or convolution, so fp16 on the CPU (real, or under a simulated
  // device) stores fp16-rounded values and does the arithmetic in fp32.
  bool emulated() const { return storage != arithmetic; }
};

TensorPlacement PlanPlacement(const DeviceInfo& device, DType compute);

// Moves `t` to the placement's device; floating tensors are rounded to the
// storage dtype and held in the arithmetic dtype, others keep their dtype.
at::Tensor Place(const at::Tensor& t, const TensorPlacement& placement);

}  // namespace infergate
