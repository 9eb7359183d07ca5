#include "devices/tensor_placement.h"

#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cmath>

#include "devices/simulated_run.h"

namespace infergate {
namespace {

DeviceInfo Cpu() {
  DeviceInfo d;
  return d;
}

DeviceInfo SimulatedMps() {
  DeviceInfo d;
  d.id = {DeviceKind::kMps, 0};
  d.simulated = true;
  auto rules = std::make_shared<SimulationRules>();
  rules->device = d.id;
  rules->reject_float64 = true;
  rules->unsupported_ops = {"aten::linear"};
  rules->memory = std::make_shared<MemoryLedger>(uint64_t{1} << 30);
  d.simulation = rules;
  return d;
}

TEST(TensorPlacement, IntegerTensorsAreNeverCast) {
  at::Tensor ids = at::arange(10, at::TensorOptions().dtype(at::kLong));
  at::Tensor mask = ids.remainder(2).to(at::kBool);
  for (DType compute : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    TensorPlacement p = PlanPlacement(SimulatedMps(), compute);
    EXPECT_EQ(Place(ids, p).scalar_type(), at::kLong);
    EXPECT_TRUE(at::equal(Place(ids, p), ids));
    EXPECT_EQ(Place(mask, p).scalar_type(), at::kBool);
  }
}

TEST(TensorPlacement, Float64BecomesTheComputeDtypeBeforeMps) {
  at::Tensor x = at::randn({3, 4}, at::TensorOptions().dtype(at::kDouble));
  TensorPlacement p = PlanPlacement(SimulatedMps(), DType::kFloat32);
  EXPECT_TRUE(p.device.is_cpu());  // simulated devices compute on the CPU
  at::Tensor placed = Place(x, p);
  EXPECT_EQ(placed.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::allclose(placed.to(at::kDouble), x, 1e-6, 1e-6));
}

TEST(TensorPlacement, Fp16OnTheCpuComputesInFp16) {
  TensorPlacement p = PlanPlacement(Cpu(), DType::kFloat16);
  EXPECT_EQ(p.dtype, at::kHalf);
  at::Tensor x = at::full({1}, 1.0 + 1.0 / 4096, at::TensorOptions().dtype(at::kFloat));  // not representable in fp16
  at::Tensor placed = Place(x, p);
  EXPECT_EQ(placed.scalar_type(), at::kHalf);
  EXPECT_EQ(placed.item<float>(), 1.0f);
  // Real fp16 arithmetic: a product past fp16's largest value (65504) is inf,
  // as on an fp16 accelerator (fp32 arithmetic would have carried it).
  at::Tensor big = Place(at::full({1, 1}, 300.0f), p);
  EXPECT_TRUE(std::isinf(at::mm(big, big).item<float>()));
  EXPECT_EQ(PlanPlacement(Cpu(), DType::kBFloat16).dtype, at::kBFloat16);
  EXPECT_EQ(PlanPlacement(Cpu(), DType::kFloat32).dtype, at::kFloat);
}

TEST(SimulatedRun, UnsupportedOpRaisesNotImplementedLikeRealMps) {
  DeviceInfo mps = SimulatedMps();
  SimulatedRun run(*mps.simulation);
  at::linear(at::randn({2, 3}), at::randn({4, 3}));
  try {
    run.Check();
    FAIL() << "expected NotImplementedError";
  } catch (const c10::NotImplementedError& e) {
    EXPECT_NE(std::string(e.what()).find("The operator 'aten::linear' is not currently implemented for the MPS "
                                         "device"),
              std::string::npos)
        << e.what();
  }
}

TEST(SimulatedRun, Float64OnMpsRaisesTypeError) {
  DeviceInfo mps = SimulatedMps();
  SimulatedRun run(*mps.simulation);
  at::zeros({2}, at::TensorOptions().dtype(at::kDouble)).add(1.0);
  try {
    run.Check();
    FAIL() << "expected TypeError";
  } catch (const c10::TypeError& e) {
    EXPECT_NE(std::string(e.what()).find("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't "
                                         "support float64. Please use float32 instead."),
              std::string::npos);
  }
}

TEST(SimulatedRun, WorkingSetPastTheMemorySizeIsOutOfMemory) {
  auto rules = std::make_shared<SimulationRules>();
  rules->device = {DeviceKind::kCuda, 0};
  rules->memory = std::make_shared<MemoryLedger>(1 << 20);
  {
    SimulatedRun run(*rules);
    at::randn({16, 16}).relu();
    EXPECT_NO_THROW(run.Check());
  }
  SimulatedRun run(*rules);
  at::randn({1024, 1024}).relu();  // 4 MiB out
  EXPECT_THROW(run.Check(), c10::OutOfMemoryError);
}

TEST(SimulatedRun, OnlyWatchesTheThreadAndScopeItLivesIn) {
  DeviceInfo mps = SimulatedMps();
  {
    SimulatedRun run(*mps.simulation);
  }
  at::linear(at::randn({2, 3}), at::randn({4, 3}));  // no run alive: nothing recorded anywhere
  SimulatedRun run(*mps.simulation);
  EXPECT_NO_THROW(run.Check());
}

}  // namespace
}  // namespace infergate
