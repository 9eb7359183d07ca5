// A TorchScript model loaded for an accelerator leaves its weights as read
// in a HostCopyStore, and later loads of the same file start from there:
// without the file (it is deleted here before they run), in any dtype, and
// never changing the copy they start from.

#include <gtest/gtest.h>
#include <torch/script.h>

#include <filesystem>

#include "absl/status/status.h"
#include "scheduler/loaders/torchscript/torchscript_model.h"
#include "scheduler/model/host_copy_store.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/text_proto.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;

// Two linear layers and a running-mean buffer, saved as <scratch>/mlp/1/model.pt.
torch::jit::Module SmallMlp() {
  torch::jit::Module m("SmallMlp");
  at::manual_seed(11);
  m.register_parameter("w1", at::randn({16, 8}) * 0.3, false);
  m.register_parameter("w2", at::randn({4, 16}) * 0.3, false);
  m.register_buffer("shift", at::randn({4}));
  m.define(R"(
def forward(self, x):
    return torch.linear(torch.relu(torch.linear(x, self.w1)), self.w2) + self.shift
)");
  m.eval();
  return m;
}

constexpr char kHostCopyConfig[] = R"pb(
  name: "mlp"
  max_batch_size: 4
  inputs {
    name: "x"
    dtype: FLOAT32
    dims: [ 8 ]
  }
  torchscript_optimization: TORCHSCRIPT_OPTIMIZE_OFF
)pb";

DeviceInfo SimulatedCuda() {
  DeviceInfo info;
  info.id = {DeviceKind::kCuda, 0};
  info.simulated = true;
  return info;
}

DeviceInfo Cpu() { return DeviceInfo{}; }

class TorchScriptHostCopy : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path version = fs::path(dir_.path()) / "mlp" / "1";
    fs::create_directories(version);
    path_ = (version / "model.pt").string();
    SmallMlp().save(path_);
  }

  absl::StatusOr<std::shared_ptr<TorchScriptModel>> Load(const DeviceInfo& device, DType dtype, bool keep,
                                                         const std::string& content = "v1") {
    const HostCopyKey key{"mlp", path_, content};
    HostCopyUse host{&store_, key, keep, store_.Find(key)};
    return TorchScriptModel::Load(path_, testing::FromText<v1::ModelConfig>(kHostCopyConfig), device, dtype, nullptr,
                                  host);
  }

  static at::Tensor Answer(const TorchScriptModel& model, const at::Tensor& x) {
    absl::StatusOr<std::vector<NamedTensor>> out = model.Run({x});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->at(0).tensor : at::Tensor();
  }

  testing::ScratchDir dir_{"ig_hostcopy_"};
  std::string path_;
  uint64_t lent_ = 0;
  HostCopyStore store_{[this](uint64_t bytes) {
                         lent_ += bytes;
                         return absl::OkStatus();
                       },
                       [this](uint64_t bytes) { lent_ -= bytes; }, [] { return uint64_t{0}; }};
};

TEST_F(TorchScriptHostCopy, LaterLoadsStartFromTheHostCopyWithoutTheFile) {
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> first = Load(SimulatedCuda(), DType::kFloat32, /*keep=*/true);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE((*first)->from_host_copy());
  ASSERT_EQ(store_.count(), 1u);
  // The weights as read: two matrices and the buffer in FP32.
  EXPECT_EQ(store_.bytes(), (16 * 8 + 4 * 16 + 4) * 4u);
  EXPECT_EQ(lent_, store_.bytes());
  const at::Tensor x = at::randn({3, 8});
  const at::Tensor expected = Answer(**first, x);

  fs::remove(path_);  // from here on, only the host copy has the weights
  for (const DeviceInfo& device : {SimulatedCuda(), Cpu()}) {
    absl::StatusOr<std::shared_ptr<TorchScriptModel>> again = Load(device, DType::kFloat32, /*keep=*/false);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE((*again)->from_host_copy());
    EXPECT_TRUE(at::equal(Answer(**again, x), expected)) << device.id.ToString();
  }
  // In BF16 (its floating weights cast on the way), then in FP32 again: the
  // copy the loads start from is never changed by them.
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> reduced = Load(SimulatedCuda(), DType::kBFloat16, false);
  ASSERT_TRUE(reduced.ok()) << reduced.status();
  EXPECT_TRUE((*reduced)->from_host_copy());
  EXPECT_EQ((*reduced)->resident_bytes(), (16 * 8 + 4 * 16 + 4) * 2u);
  EXPECT_TRUE(at::allclose(Answer(**reduced, x), expected, 0.05, 0.05));
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> full = Load(SimulatedCuda(), DType::kFloat32, false);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_TRUE(at::equal(Answer(**full, x), expected));
  // Copies made from the host copy are independent of one another: the
  // loads so far all still answer.
  EXPECT_TRUE(at::equal(Answer(**first, x), expected));
  EXPECT_EQ(store_.hits(), 4u);
}

// A forward() that updates a buffer (a call counter) updates its own copy's:
// copies from one host copy share its parameters, never its buffers.
TEST_F(TorchScriptHostCopy, CopiesKeepBuffersOfTheirOwn) {
  torch::jit::Module counting("Counting");
  counting.register_parameter("w", at::ones({8}), false);
  counting.register_buffer("calls", at::zeros({1}));
  counting.define(R"(
def forward(self, x):
    self.calls.add_(1.0)
    return x * self.w + self.calls
)");
  counting.save(path_);
  auto load = [&](const DeviceInfo& device, bool keep) { return Load(device, DType::kFloat32, keep, "counting"); };
  ASSERT_TRUE(load(SimulatedCuda(), /*keep=*/true).ok());
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> a = load(Cpu(), false);
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> b = load(SimulatedCuda(), false);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->from_host_copy() && (*b)->from_host_copy());
  const at::Tensor x = at::zeros({1, 8});
  Answer(**a, x);
  EXPECT_EQ(Answer(**a, x)[0][0].item<float>(), 2);  // a's second call
  EXPECT_EQ(Answer(**b, x)[0][0].item<float>(), 1);  // b's first
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> c = load(Cpu(), false);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Answer(**c, x)[0][0].item<float>(), 1);  // the host copy's counter never moved
}

// The caller found the copy and so skipped checking the file: the load
// starts from that copy even when the store dropped it meanwhile (a reload
// or the CPU's budget took it), never from a file read it did not check.
TEST_F(TorchScriptHostCopy, ALoadStartsFromTheCopyItWasGivenEvenOnceTheStoreDroppedIt) {
  ASSERT_TRUE(Load(SimulatedCuda(), DType::kFloat32, /*keep=*/true).ok());
  const HostCopyKey key{"mlp", path_, "v1"};
  HostCopyUse host{&store_, key, /*keep=*/false, store_.Find(key)};
  ASSERT_NE(host.copy, nullptr);
  EXPECT_EQ(store_.DropIf([](const HostCopyKey&) { return true; }), 1u);
  fs::remove(path_);
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> loaded = TorchScriptModel::Load(
      path_, testing::FromText<v1::ModelConfig>(kHostCopyConfig), SimulatedCuda(), DType::kFloat32, nullptr, host);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE((*loaded)->from_host_copy());
  // Without a copy handed to it, the same load reads the file (gone).
  host.copy = nullptr;
  EXPECT_FALSE(TorchScriptModel::Load(path_, testing::FromText<v1::ModelConfig>(kHostCopyConfig), SimulatedCuda(),
                                      DType::kFloat32, nullptr, host)
                   .ok());
}

TEST_F(TorchScriptHostCopy, AnotherFileStateOrNoKeepingReadsTheFile) {
  // A CPU load keeps nothing (its copy is in host memory already).
  ASSERT_TRUE(Load(Cpu(), DType::kFloat32, /*keep=*/false).ok());
  EXPECT_EQ(store_.count(), 0u);
  ASSERT_TRUE(Load(SimulatedCuda(), DType::kFloat32, /*keep=*/true).ok());
  ASSERT_EQ(store_.count(), 1u);
  fs::remove(path_);
  // The same model's file in another state is not served from the old copy.
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> other = Load(SimulatedCuda(), DType::kFloat32, true, "v2");
  EXPECT_FALSE(other.ok());
  EXPECT_EQ(store_.hits(), 0u);
}

}  // namespace
}  // namespace infergate
