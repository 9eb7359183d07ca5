#pragma once
// Tensors as the scheduler passes them around.

#include <string>

#include <ATen/core/Tensor.h>

namespace infergate {

struct NamedTensor {
  std::string name;
  at::Tensor tensor;
};

}  // namespace infergate
