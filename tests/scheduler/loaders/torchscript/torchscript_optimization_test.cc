// TorchScript copies on the CPU in FP32 are served optimized for inference
// when the optimized module answers as the saved one does on the check
// inputs; otherwise (no inputs to check on, a config that says OFF, another
// device or dtype, an optimization that fails) they are served as saved.

#include "scheduler/loaders/torchscript/torchscript_optimization.h"

#include <gtest/gtest.h>
#include <torch/script.h>

#include <filesystem>

#include "scheduler/loaders/torchscript/torchscript_model.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/text_proto.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;

// A small CNN (conv, relu, pool, linear head) on 3x8x8 images, saved as
// <scratch>/cnn/1/model.pt: the kind of model the optimization is for.
torch::jit::Module SmallCnn() {
  torch::jit::Module m("SmallCnn");
  at::manual_seed(7);
  m.register_parameter("cw", at::randn({4, 3, 3, 3}) * 0.3, false);
  m.register_parameter("cb", at::randn({4}) * 0.1, false);
  m.register_parameter("fw", at::randn({5, 4 * 4 * 4}) * 0.1, false);
  m.register_parameter("fb", at::randn({5}) * 0.1, false);
  m.define(R"(
def forward(self, image):
    h = torch.relu(torch.conv2d(image, self.cw, self.cb, [1, 1], [1, 1]))
    h = torch.max_pool2d(h, [2, 2])
    return torch.linear(torch.flatten(h, 1), self.fw, self.fb)
)");
  m.eval();
  return m;
}

class TorchScriptOptimization : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path version = fs::path(dir_.path()) / "cnn" / "1";
    fs::create_directories(version);
    path_ = (version / "model.pt").string();
    SmallCnn().save(path_);
  }

  absl::StatusOr<std::shared_ptr<TorchScriptModel>> Load(const std::string& config_text,
                                                         const DeviceInfo& device = DeviceInfo{},
                                                         DType dtype = DType::kFloat32) {
    return TorchScriptModel::Load(path_, testing::FromText<v1::ModelConfig>(config_text), device, dtype);
  }

  testing::ScratchDir dir_{"ig_tsopt_"};
  std::string path_;
};

constexpr char kDeclared[] = R"pb(
  name: "cnn"
  max_batch_size: 8
  inputs {
    name: "image"
    dtype: FLOAT32
    dims: [ 3, 8, 8 ]
  }
)pb";

TEST_F(TorchScriptOptimization, ACpuCopyWithDeclaredInputsIsServedOptimizedAndAnswersTheSame) {
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> optimized = Load(kDeclared);
  ASSERT_TRUE(optimized.ok()) << optimized.status();
  EXPECT_TRUE((*optimized)->optimized());
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> saved =
      Load(std::string(kDeclared) + " torchscript_optimization: TORCHSCRIPT_OPTIMIZE_OFF");
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_FALSE((*saved)->optimized());
  // Batch sizes other than the check's (2 rows) answer the same too.
  for (int64_t rows : {1, 3, 8}) {
    const at::Tensor image = at::randn({rows, 3, 8, 8});
    absl::StatusOr<std::vector<NamedTensor>> a = (*optimized)->Run({image});
    absl::StatusOr<std::vector<NamedTensor>> b = (*saved)->Run({image});
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
    ASSERT_EQ(a->size(), 1u);
    EXPECT_FALSE((*a)[0].tensor.is_mkldnn());
    EXPECT_EQ((*a)[0].tensor.sizes(), (*b)[0].tensor.sizes());
    EXPECT_TRUE(at::allclose((*a)[0].tensor, (*b)[0].tensor, 1e-4, 1e-4)) << rows << " rows";
  }
}

TEST_F(TorchScriptOptimization, ServedAsSavedWhereNothingChecksItOrItIsNotACpuFp32Copy) {
  // No declared inputs: nothing to check the optimized module on.
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> undeclared = Load(R"pb(name: "cnn" max_batch_size: 8)pb");
  ASSERT_TRUE(undeclared.ok()) << undeclared.status();
  EXPECT_FALSE((*undeclared)->optimized());
  EXPECT_TRUE((*undeclared)->Run({at::randn({2, 3, 8, 8})}).ok());
  // BF16 on the CPU: the accuracy contract's business, not this.
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> bf16 = Load(kDeclared, DeviceInfo{}, DType::kBFloat16);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_FALSE((*bf16)->optimized());
}

TEST(OptimizeForInference, RefusesWhenTheCheckCannotRunAndLeavesTheModuleAsItWas) {
  torch::jit::Module cnn = SmallCnn();
  // Four channels where the model takes three: the saved module throws too.
  absl::StatusOr<OptimizedModule> refused = OptimizeForInference(cnn, {at::randn({2, 4, 8, 8})});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("optimizing it failed"), std::string::npos) << refused.status();
  // The module given still runs as saved, its weights still attributes.
  c10::InferenceMode guard;
  EXPECT_TRUE(cnn.hasattr("cw"));
  EXPECT_EQ(cnn.forward({at::randn({1, 3, 8, 8})}).toTensor().sizes(), (std::vector<int64_t>{1, 5}));
}

TEST(OptimizeForInference, ComparesEveryOutputOfATupleOrDict) {
  torch::jit::Module m("Outputs");
  m.register_parameter("w", at::randn({3, 3, 1, 1}), false);
  m.define(R"(
def forward(self, x):
    y = torch.relu(torch.conv2d(x, self.w))
    return (y, (x > 0).sum(dim=[1, 2, 3]), {"twice": y * 2.0, "plus": y + 1.0}, [y, y])
)");
  m.eval();
  absl::StatusOr<OptimizedModule> optimized = OptimizeForInference(m, {at::randn({2, 3, 4, 4})});
  ASSERT_TRUE(optimized.ok()) << optimized.status();
  EXPECT_LE(optimized->max_abs_error, 1e-4);
}

// A module built in C++ has no `training` attribute; it is frozen all the
// same (its weights folded into the graph), and its convolutions run in
// oneDNN's layout.
TEST(OptimizeForInference, FreezesAModuleWithoutATrainingAttribute) {
  torch::jit::Module cnn = SmallCnn();
  ASSERT_FALSE(cnn.hasattr("training"));
  absl::StatusOr<OptimizedModule> optimized = OptimizeForInference(cnn, {at::randn({2, 3, 8, 8})});
  ASSERT_TRUE(optimized.ok()) << optimized.status();
  EXPECT_FALSE(optimized->module.hasattr("cw")) << "the weights are still attributes: not frozen";
  const std::string graph = optimized->module.get_method("forward").graph()->toString();
  EXPECT_NE(graph.find("mkldnn"), std::string::npos) << graph;
}

}  // namespace
}  // namespace infergate
