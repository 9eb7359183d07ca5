#pragma once
// LibTorch tensors <-> wire tensors for the integration tests' clients.

#include <ATen/core/Tensor.h>

#include <string>

#include "infergate/v1/tensor.pb.h"

namespace infergate::testing {

// FLOAT32, FLOAT64, INT64 and INT32 tensors as the wire carries them.
v1::Tensor ToWire(const at::Tensor& t, const std::string& name);
// A FLOAT32, FLOAT64 or INT64 wire tensor; a byte count that does not match
// its shape is a test failure (and leaves the tensor uninitialised).
at::Tensor FromWire(const v1::Tensor& w);

}  // namespace infergate::testing
