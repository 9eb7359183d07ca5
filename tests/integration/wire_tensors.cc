#include "tests/integration/wire_tensors.h"

#include <ATen/ops/empty.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace infergate::testing {

v1::Tensor ToWire(const at::Tensor& t, const std::string& name) {
  at::Tensor c = t.contiguous();
  v1::Tensor w;
  w.set_name(name);
  switch (c.scalar_type()) {
    case at::kFloat: w.set_dtype(v1::FLOAT32); break;
    case at::kDouble: w.set_dtype(v1::FLOAT64); break;
    case at::kLong: w.set_dtype(v1::INT64); break;
    case at::kInt: w.set_dtype(v1::INT32); break;
    default: ADD_FAILURE() << "unexpected dtype in test";
  }
  for (int64_t d : c.sizes()) w.add_shape(d);
  w.set_data(std::string(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size()));
  return w;
}

at::Tensor FromWire(const v1::Tensor& w) {
  at::ScalarType type = at::kFloat;
  switch (w.dtype()) {
    case v1::FLOAT32: type = at::kFloat; break;
    case v1::FLOAT64: type = at::kDouble; break;
    case v1::INT64: type = at::kLong; break;
    default: ADD_FAILURE() << "unexpected wire dtype " << w.dtype();
  }
  std::vector<int64_t> shape(w.shape().begin(), w.shape().end());
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
  EXPECT_EQ(static_cast<size_t>(t.numel() * t.element_size()), w.data().size());
  std::memcpy(t.data_ptr(), w.data().data(), std::min<size_t>(w.data().size(), t.numel() * t.element_size()));
  return t;
}

}  // namespace infergate::testing
