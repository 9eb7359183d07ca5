#include "devices/activation_meter.h"

#include <ATen/ops/add.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/relu.h>
#include <gtest/gtest.h>
#include <torch/script.h>

namespace infergate {
namespace {

constexpr int64_t kElements = 1024;
constexpr uint64_t kTensorBytes = kElements * sizeof(float);

at::Tensor Input() { return at::ones({kElements}); }

TEST(ActivationMeter, CountsNewOutputsOnly) {
  at::Tensor x = Input();
  ActivationMeter meter;
  at::Tensor a = at::add(x, x);               // new: counted
  at::relu_(a);                               // in place: nothing new
  at::Tensor view = a.view({32, 32});         // a view of a: nothing new
  at::Tensor b = at::add(view.flatten(), x);  // new: counted
  EXPECT_EQ(meter.peak_bytes(), 2 * kTensorBytes);
}

TEST(ActivationMeter, FreedOutputsLeaveThePeak) {
  at::Tensor x = Input();
  ActivationMeter meter;
  for (int i = 0; i < 5; ++i) {
    at::Tensor t = at::add(x, x);  // freed before the next one is made
  }
  EXPECT_EQ(meter.peak_bytes(), kTensorBytes);
}

// TorchScript calls every op boxed, where an op's arguments are copies that
// may be gone by the time the op's end is reported: the meter must tell an
// in-place op from a new output all the same.
TEST(ActivationMeter, MeasuresATorchScriptFunction) {
  torch::jit::Module module("m");
  module.define(R"JIT(
def forward(self, x):
    y = x + x
    z = torch.relu_(y)
    return z + x
)JIT");
  at::Tensor x = Input();
  ActivationMeter meter;
  for (int i = 0; i < 20; ++i) {
    at::Tensor out = module.forward({x}).toTensor();
    ASSERT_EQ(out.numel(), kElements);
  }
  // y (which z shares) and the answer are live together; nothing more.
  EXPECT_EQ(meter.peak_bytes(), 2 * kTensorBytes);
}

TEST(ActivationMeter, NestedMetersEachSeeTheirOwnRun) {
  at::Tensor x = Input();
  ActivationMeter outer;
  at::Tensor kept = at::add(x, x);
  {
    ActivationMeter inner;
    at::Tensor t = at::add(x, x);
    EXPECT_EQ(inner.peak_bytes(), kTensorBytes);
  }
  EXPECT_EQ(outer.peak_bytes(), 2 * kTensorBytes);
}

}  // namespace
}  // namespace infergate
