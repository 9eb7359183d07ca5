#pragma once
// Tensors as the scheduler passes them around.

#include <ATen/core/Tensor.h>

#include <string>

namespace infergate {

struct NamedTensor {
  std::string name;
  at::Tensor tensor;
};

}  // namespace infergate
