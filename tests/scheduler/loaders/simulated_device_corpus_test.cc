// A corpus of model patterns, built here as TorchScript with LibTorch, run
// through the server's own loader seam (LoadServable) on simulated MPS and CUDA and
// compared with the CPU. Patterns real MPS runs must run on both simulated
// devices with no device failure and answer within the precision's
// tolerance of the CPU; patterns real MPS refuses must fail on simulated
// MPS with the device failure the scheduler turns into the right fallback
// reason, and run on simulated CUDA.

#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>
#include <torch/script.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "devices/device_failure.h"
#include "devices/device_registry.h"
#include "devices/precision.h"
#include "scheduler/loaders/load_servable.h"
#include "scheduler/routing/failure_policy.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;

struct Pattern {
  std::string name;
  std::function<void(torch::jit::Module&)> state;  // parameters and buffers
  std::string forward;                             // TorchScript source of forward()
  std::function<std::vector<at::Tensor>()> inputs;
  // Empty: real MPS runs it. Otherwise the fallback reason simulated MPS
  // must give ("dtype:float64", "unsupported_op:aten::...").
  std::string mps_refuses;
};

at::Tensor Randn(std::vector<int64_t> shape) { return at::randn(shape); }

void Linear(torch::jit::Module& m, const std::string& prefix, int64_t out, int64_t in) {
  m.register_parameter(prefix + "w", at::randn({out, in}) / std::sqrt(static_cast<double>(in)), false);
  m.register_parameter(prefix + "b", at::randn({out}) * 0.1, false);
}

std::vector<Pattern> Corpus() {
  auto x16 = [] { return std::vector<at::Tensor>{Randn({4, 16})}; };
  auto image = [] { return std::vector<at::Tensor>{Randn({2, 3, 8, 8})}; };
  return {
      {"linear", [](auto& m) { Linear(m, "", 8, 16); },
       "def forward(self, x):\n    return torch.linear(x, self.w, self.b)\n", x16, ""},
      {"conv2d",
       [](auto& m) {
         m.register_parameter("w", at::randn({4, 3, 3, 3}) * 0.2, false);
         m.register_parameter("b", at::randn({4}) * 0.1, false);
       },
       "def forward(self, x):\n    return torch.conv2d(x, self.w, self.b, [1, 1], [1, 1])\n", image, ""},
      {"batch_norm_eval",
       [](auto& m) {
         m.register_parameter("g", at::rand({3}) + 0.5, false);
         m.register_parameter("b", at::randn({3}) * 0.1, false);
         m.register_buffer("mean", at::randn({3}) * 0.1);
         m.register_buffer("var", at::rand({3}) + 0.5);
         m.register_buffer("num_batches_tracked", at::zeros({}, at::kLong));
       },
       "def forward(self, x):\n"
       "    return torch.batch_norm(x, self.g, self.b, self.mean, self.var, False, 0.1, 1e-5, False)\n",
       image, ""},
      {"layer_norm",
       [](auto& m) {
         m.register_parameter("g", at::rand({16}) + 0.5, false);
         m.register_parameter("b", at::randn({16}) * 0.1, false);
       },
       "def forward(self, x):\n    return torch.layer_norm(x, [16], self.g, self.b, 1e-5, False)\n", x16, ""},
      {"gelu", [](auto& m) { Linear(m, "", 16, 16); },
       "def forward(self, x):\n    return torch.gelu(torch.linear(x, self.w, self.b))\n", x16, ""},
      {"softmax", [](auto&) {}, "def forward(self, x):\n    return torch.softmax(x, -1)\n", x16, ""},
      // The case a user met: a Python float multiplies the output.
      {"python_number_arithmetic", [](auto& m) { Linear(m, "fc_", 8, 16); },
       "def forward(self, x):\n"
       "    h = torch.linear(x, self.fc_w, self.fc_b) * 0.5\n"
       "    h = (h + 1) * 2 - 0.25\n"
       "    return h / 3 + h ** 2 - torch.clamp(h, -1.0, 1.0)\n",
       x16, ""},
      {"embedding_int64_indices", [](auto& m) { m.register_parameter("table", at::randn({50, 8}), false); },
       "def forward(self, ids):\n"
       "    pos = torch.arange(ids.size(1))\n"
       "    return torch.embedding(self.table, (ids + pos) % 50).mean(1)\n",
       [] { return std::vector<at::Tensor>{at::randint(0, 50, {3, 6}, at::kLong)}; }, ""},
      {"pooling", [](auto&) {},
       "def forward(self, x):\n"
       "    a = torch.max_pool2d(x, [2, 2])\n"
       "    b = torch.avg_pool2d(x, [2, 2])\n"
       "    return a + b + torch.adaptive_avg_pool2d(x, [4, 4])\n",
       image, ""},
      {"interpolate", [](auto&) {},
       "def forward(self, x):\n"
       "    a = torch.upsample_nearest2d(x, [16, 16])\n"
       "    b = torch.upsample_bilinear2d(x, [16, 16], False)\n"
       "    c = torch.upsample_nearest2d(x, None, [2.0, 2.0])\n"
       "    return a + b + c\n",
       image, ""},
      {"attention",
       [](auto& m) {
         Linear(m, "q", 16, 16);
         Linear(m, "k", 16, 16);
         Linear(m, "v", 16, 16);
       },
       "def forward(self, x):\n"
       "    q = torch.linear(x, self.qw, self.qb)\n"
       "    k = torch.linear(x, self.kw, self.kb)\n"
       "    v = torch.linear(x, self.vw, self.vb)\n"
       "    scores = torch.matmul(q, k.transpose(-2, -1)) / 4.0\n"
       "    n = x.size(1)\n"
       "    mask = torch.triu(torch.ones([n, n]), 1) > 0.5\n"
       // -1e9 is out of FP16's range: real FP16 (on MPS, CUDA, and the CPU
       // under LibTorch 2.x) refuses it, as models meant for FP16 know.
       "    scores = scores.masked_fill(mask, -1e4)\n"
       "    return torch.matmul(torch.softmax(scores, -1), v)\n",
       [] { return std::vector<at::Tensor>{Randn({2, 5, 16})}; }, ""},
      {"dropout_eval", [](auto& m) { Linear(m, "", 16, 16); },
       "def forward(self, x):\n"
       "    h = torch.dropout(torch.linear(x, self.w, self.b), 0.1, False)\n"
       "    return torch.feature_dropout(h, 0.5, False)\n",
       x16, ""},
      {"where_with_scalars", [](auto&) {},
       "def forward(self, x):\n"
       "    a = torch.where(x > 0.0, x, 0.0)\n"
       "    b = torch.where(x < -0.5, -1.0, x)\n"
       "    return a + b + torch.where(x > 0, 1.0, 0.0)\n",
       x16, ""},
      // The server casts floating parameters and buffers to the compute
      // dtype when it loads a model, so a float64 buffer reaches MPS as
      // float32 and runs.
      {"float64_buffer_cast_by_the_server",
       [](auto& m) { m.register_buffer("scale", at::rand({16}, at::kDouble) + 0.5); },
       "def forward(self, x):\n    return x * self.scale\n", x16, ""},
      // What real MPS refuses: float64 the model makes itself while it runs,
      // and an op the configured deny list names.
      {"float64_made_in_forward", [](auto&) {}, "def forward(self, x):\n    return x.double() * 2.0\n", x16,
       "dtype:float64"},
      {"float64_tensor_created_in_forward", [](auto&) {},
       // dtype 7 is torch.float64 (the C++ script compiler resolves no dtype names).
       "def forward(self, x):\n    return x + torch.ones([16], dtype=7)\n", x16, "dtype:float64"},
      {"unsupported_op", [](auto&) {},
       "def forward(self, x):\n    return torch.upsample_bicubic2d(x, [16, 16], False)\n", image,
       "unsupported_op:aten::upsample_bicubic2d"},
  };
}

// Relative to the largest reference value: what rounding the compute dtype
// allows through a few layers.
double Tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return 1e-2;
    case DType::kBFloat16: return 5e-2;
    default: return 1e-4;
  }
}

class SimulatedDeviceCorpus : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    DiscoveryOptions options;
    options.simulated = *ParseSimulatedDevices("mps@14,cuda:0@8.0");
    options.allow = *ParseDeviceAllowList("cpu,mps,cuda:0");
    registry_ = new DeviceRegistry(*DeviceRegistry::Discover(options));
    dir_ = fs::temp_directory_path() / absl::StrCat("ig_corpus_", ::getpid());
    fs::create_directories(dir_);
  }
  static void TearDownTestSuite() {
    fs::remove_all(dir_);
    delete registry_;
  }

  static std::string Save(const Pattern& p) {
    torch::jit::Module m(p.name);
    p.state(m);
    m.define(p.forward);
    std::string path = (dir_ / (p.name + ".pt")).string();
    m.save(path);
    return path;
  }

  static DeviceId Id(const std::string& device) {
    DeviceRequest r = *ParseDeviceRequest(device);
    return {r.kind, r.index};
  }

  static absl::StatusOr<std::vector<NamedTensor>> Run(const std::string& path, const std::string& device, DType dtype,
                                                      const std::vector<at::Tensor>& inputs) {
    std::optional<DeviceInfo> info = registry_->Find(Id(device));
    if (!info) return absl::NotFoundError(device + " missing");
    v1::ModelConfig config;
    config.set_name("corpus");
    absl::StatusOr<std::shared_ptr<Servable>> model = LoadServable(path, config, *info, dtype, nullptr, 1);
    if (!model.ok()) return model.status();
    return (*model)->Run(inputs);
  }

  static DeviceRegistry* registry_;
  static fs::path dir_;
};

DeviceRegistry* SimulatedDeviceCorpus::registry_ = nullptr;
fs::path SimulatedDeviceCorpus::dir_;

TEST_F(SimulatedDeviceCorpus, EveryPatternRealMpsRunsRunsOnSimulatedMpsAndCudaLikeTheCpu) {
  ASSERT_TRUE(registry_->Find({DeviceKind::kMps, 0}).has_value());
  ASSERT_TRUE(registry_->Find({DeviceKind::kCuda, 0}).has_value());
  int runs = 0;
  for (const Pattern& p : Corpus()) {
    std::string path = Save(p);
    at::manual_seed(7);
    std::vector<at::Tensor> inputs = p.inputs();
    absl::StatusOr<std::vector<NamedTensor>> reference = Run(path, "cpu", DType::kFloat32, inputs);
    ASSERT_TRUE(reference.ok()) << p.name << ": " << reference.status();
    for (const char* device : {"mps", "cuda:0"}) {
      if (p.mps_refuses.size() && std::string(device) == "mps") continue;
      std::optional<DeviceInfo> info = registry_->Find(Id(device));
      for (Precision precision : {Precision::kFp32, Precision::kAuto}) {
        DType dtype = ResolveComputeDType(info->precision, precision, Precision::kAuto);
        SCOPED_TRACE(absl::StrCat(p.name, " on ", device, " in ", DTypeName(dtype)));
        absl::StatusOr<std::vector<NamedTensor>> out = Run(path, device, dtype, inputs);
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_FALSE(DeviceFailureOf(out.status()).has_value());
        ASSERT_EQ(out->size(), reference->size());
        for (size_t i = 0; i < out->size(); ++i) {
          const at::Tensor& want = (*reference)[i].tensor;
          const at::Tensor& got = (*out)[i].tensor;
          ASSERT_EQ(got.sizes(), want.sizes());
          double scale = std::max(1.0, want.abs().max().item<double>());
          double error = (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
          EXPECT_LE(error, Tolerance(dtype) * scale);
        }
        ++runs;
      }
    }
  }
  EXPECT_GE(runs, 4 * 14);
}

TEST_F(SimulatedDeviceCorpus, PatternsRealMpsRefusesFallBackFromSimulatedMpsWithTheRightReason) {
  int refused = 0;
  for (const Pattern& p : Corpus()) {
    if (p.mps_refuses.empty()) continue;
    SCOPED_TRACE(p.name);
    std::string path = Save(p);
    std::vector<at::Tensor> inputs = p.inputs();
    std::optional<DeviceInfo> mps = registry_->Find({DeviceKind::kMps, 0});
    ASSERT_TRUE(mps.has_value());
    absl::StatusOr<std::vector<NamedTensor>> out =
        Run(path, "mps", ResolveComputeDType(mps->precision, Precision::kFp32, Precision::kAuto), inputs);
    ASSERT_FALSE(out.ok());
    ASSERT_TRUE(DeviceFailureOf(out.status()).has_value()) << out.status();
    FailureDecision decision = DecideOnFailure(out.status(), mps->id, false);
    EXPECT_EQ(decision.action, FailureAction::kRememberAndFallBack);
    ASSERT_TRUE(decision.reason.has_value());
    EXPECT_EQ(decision.reason->ToString(), p.mps_refuses);
    ++refused;
  }
  EXPECT_EQ(refused, 3);
}

}  // namespace
}  // namespace infergate
