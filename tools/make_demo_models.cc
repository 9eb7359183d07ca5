// Writes the demo model repository: TorchScript models built in C++ with
// fixed seeds (no Python needed), each with its config.pbtxt.
//
//   make-demo-models DIR [--with-test-models] [--with-bench-models]

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/randn.h>
#include <torch/script.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

namespace fs = std::filesystem;

namespace {

at::Generator g_gen;

// Both versions are served (the default policy serves the latest alone).
constexpr char kVersionedConfig[] =
    "max_batch_size: 8\ninputs { name: \"x\" dtype: FLOAT32 dims: [2] }\nversion_policy { all {} }\n";

// Weights scaled as Kaiming-normal so activations stay in a sane range.
at::Tensor Weight(std::vector<int64_t> shape, int64_t fan_in, at::ScalarType type = at::kFloat) {
  return (at::randn(shape, g_gen) * std::sqrt(2.0 / static_cast<double>(fan_in))).to(type);
}

at::Tensor Bias(int64_t n, at::ScalarType type = at::kFloat) { return (at::randn({n}, g_gen) * 0.01).to(type); }

void Write(const fs::path& root, const std::string& name, torch::jit::Module& module, const std::string& config,
           int version = 1) {
  fs::path dir = root / name / std::to_string(version);
  fs::create_directories(dir);
  module.save((dir / "model.pt").string());
  std::ofstream(root / name / "config.pbtxt") << config;
  std::cout << "wrote " << (dir / "model.pt").string() << "\n";
}

void Mlp(const fs::path& root) {
  torch::jit::Module m("MLP");
  m.register_parameter("w1", Weight({512, 256}, 256), false);
  m.register_parameter("b1", Bias(512), false);
  m.register_parameter("w2", Weight({512, 512}, 512), false);
  m.register_parameter("b2", Bias(512), false);
  m.register_parameter("w3", Weight({10, 512}, 512), false);
  m.register_parameter("b3", Bias(10), false);
  m.define(R"(
def forward(self, x):
    h = torch.relu(torch.linear(x, self.w1, self.b1))
    h = torch.relu(torch.linear(h, self.w2, self.b2))
    return torch.linear(h, self.w3, self.b3)
)");
  Write(root, "mlp", m, R"(# 256 -> 512 -> 512 -> 10 multilayer perceptron with ReLU.
description: "MLP 256-512-512-10, ReLU"
max_batch_size: 64
inputs { name: "x" dtype: FLOAT32 dims: [256] }
outputs { name: "logits" dtype: FLOAT32 dims: [10] }
dynamic_batching { max_queue_delay_us: 500 }
warmup: true
)");
}

void Cnn(const fs::path& root) {
  torch::jit::Module m("CNN");
  m.register_parameter("c1w", Weight({16, 3, 3, 3}, 27), false);
  m.register_parameter("c1b", Bias(16), false);
  m.register_parameter("c2w", Weight({32, 16, 3, 3}, 144), false);
  m.register_parameter("c2b", Bias(32), false);
  m.register_parameter("fw", Weight({10, 32 * 16 * 16}, 32 * 16 * 16), false);
  m.register_parameter("fb", Bias(10), false);
  m.define(R"(
def forward(self, image):
    h = torch.relu(torch.conv2d(image, self.c1w, self.c1b, [1, 1], [1, 1]))
    h = torch.max_pool2d(h, [2, 2])
    h = torch.relu(torch.conv2d(h, self.c2w, self.c2b, [1, 1], [1, 1]))
    h = torch.max_pool2d(h, [2, 2])
    h = torch.flatten(h, 1)
    return torch.linear(h, self.fw, self.fb)
)");
  Write(root, "cnn", m, R"(# Two conv layers and a linear head on 3x64x64 images.
description: "small CNN on 3x64x64 images, 10 classes"
max_batch_size: 32
inputs { name: "image" dtype: FLOAT32 dims: [3, 64, 64] }
outputs { name: "logits" dtype: FLOAT32 dims: [10] }
dynamic_batching { max_queue_delay_us: 1000 }
warmup: true
# Requests may ask for priority 1 (first) or 2; those that name none get 2.
priority_levels: 2
)");
}

void Poly64(const fs::path& root) {
  torch::jit::Module m("Poly64");
  m.register_parameter("w", Weight({3, 4}, 4, at::kDouble), false);
  m.register_parameter("v", Weight({3, 4}, 4, at::kDouble), false);
  m.register_parameter("b", Bias(3, at::kDouble), false);
  m.define(R"(
def forward(self, x):
    return torch.linear(x, self.w, self.b) + torch.linear(x * x, self.v)
)");
  Write(root, "poly64", m, R"(# Quadratic features in double precision: a float64 input and output.
description: "float64 quadratic regression, 4 -> 3"
max_batch_size: 16
inputs { name: "x" dtype: FLOAT64 dims: [4] }
outputs { name: "y" dtype: FLOAT64 dims: [3] }
)");
}

void Embed(const fs::path& root) {
  torch::jit::Module m("Embed");
  m.register_parameter("table", at::randn({100, 16}, g_gen), false);
  m.define(R"(
def forward(self, ids):
    return torch.mean(torch.embedding(self.table, ids), 1)
)");
  Write(root, "embed", m, R"(# Mean of token embeddings: an INT64 input that is never cast.
description: "mean embedding of 8 token ids (0..99) into 16 floats"
max_batch_size: 16
inputs { name: "ids" dtype: INT64 dims: [8] }
outputs { name: "embedding" dtype: FLOAT32 dims: [16] }
)");
}

// Models that exercise error paths in tests; not part of the demo.
void TestModels(const fs::path& root) {
  {
    torch::jit::Module m("Fails");
    m.define(R"(
def forward(self, x):
    assert not bool(torch.any(x < 0.0)), "negative input to fails"
    return x * 2.0
)");
    Write(root, "fails", m, R"(description: "doubles x; raises for negative input"
inputs { name: "x" dtype: FLOAT32 dims: [-1] }
)");
  }
  {
    torch::jit::Module m("Pair");
    m.define(R"(
def forward(self, a, b):
    return {"sum": a + b, "argmax": torch.argmax(a, 1)}
)");
    Write(root, "pair", m, "");  // no declared inputs: taken from forward()
  }
  {
    torch::jit::Module m("Scale");
    m.register_parameter("s", at::ones({1}) * 3.0, false);
    m.define(R"(
def forward(self, x):
    return x * self.s
)");
    Write(root, "versioned", m, kVersionedConfig, 1);
    torch::jit::Module m2("Scale");
    m2.register_parameter("s", at::ones({1}) * 5.0, false);
    m2.define(R"(
def forward(self, x):
    return x * self.s
)");
    Write(root, "versioned", m2, kVersionedConfig, 2);
  }
  {
    // Ends in arithmetic with a Python float: real MPS runs it (the 0.5 is a
    // wrapped-number scalar, not a float64 tensor on the device).
    torch::jit::Module m("HalfLinear");
    m.register_parameter("fc_w", Weight({4, 8}, 8), false);
    m.register_parameter("fc_b", Bias(4), false);
    m.define(R"(
def forward(self, x):
    return torch.linear(x, self.fc_w, self.fc_b) * 0.5
)");
    Write(root, "half_linear", m, "max_batch_size: 8\ninputs { name: \"x\" dtype: FLOAT32 dims: [8] }\n");
  }
  {
    // Computes in float64 on purpose: real MPS refuses it (dtype:float64).
    torch::jit::Module m("Doubles");
    m.define(R"(
def forward(self, x):
    return x.double() * 2.0
)");
    Write(root, "doubles", m, "max_batch_size: 8\ninputs { name: \"x\" dtype: FLOAT32 dims: [4] }\n");
  }
  {
    // About a second of matrix products per call, whatever the input.
    torch::jit::Module m("Slow");
    m.define(R"(
def forward(self, x):
    y = torch.ones([1024, 1024]) * 0.001
    for _ in range(64):
        y = torch.mm(y, y) * 0.001
    return x + torch.sum(y) * 0.0
)");
    Write(root, "slow", m, "inputs { name: \"x\" dtype: FLOAT32 dims: [-1] }\n");
  }
  {
    fs::create_directories(root / "corrupt" / "1");
    std::ofstream(root / "corrupt" / "1" / "model.pt") << "this is not a TorchScript archive";
    std::ofstream(root / "corrupt" / "config.pbtxt") << "inputs { name: \"x\" dtype: FLOAT32 dims: [2] }\n";
    fs::create_directories(root / "badconfig" / "1");
    std::ofstream(root / "badconfig" / "1" / "model.pt") << "unused";
    std::ofstream(root / "badconfig" / "config.pbtxt") << "max_batch_size: -3 nonsense {";
  }
}

// Two further shapes for the peer benchmark (bench/peers.py) and the REST
// profile (bench/rest_profile.sh), so no result rests on the demo mlp's
// shape alone: a small net whose serving work outweighs its arithmetic,
// and a heavier one whose arithmetic outweighs it. Not part of the demo.
void BenchModels(const fs::path& root) {
  {
    torch::jit::Module m("Small");
    m.register_parameter("w1", Weight({64, 128}, 128), false);
    m.register_parameter("b1", Bias(64), false);
    m.register_parameter("w2", Weight({5, 64}, 64), false);
    m.register_parameter("b2", Bias(5), false);
    m.define(R"(
def forward(self, x):
    return torch.linear(torch.relu(torch.linear(x, self.w1, self.b1)), self.w2, self.b2)
)");
    Write(root, "small", m, R"(# 128 -> 64 -> 5 two-layer net with ReLU (a peer-benchmark model).
description: "two-layer net 128-64-5, ReLU"
max_batch_size: 64
inputs { name: "x" dtype: FLOAT32 dims: [128] }
outputs { name: "y" dtype: FLOAT32 dims: [5] }
dynamic_batching { max_queue_delay_us: 500 }
warmup: true
)");
  }
  {
    torch::jit::Module m("Heavy");
    m.register_parameter("w1", Weight({1536, 512}, 512), false);
    m.register_parameter("b1", Bias(1536), false);
    m.register_parameter("g1", at::ones({1536}), false);
    m.register_parameter("n1", at::zeros({1536}), false);
    m.register_parameter("w2", Weight({1536, 1536}, 1536), false);
    m.register_parameter("b2", Bias(1536), false);
    m.register_parameter("g2", at::ones({1536}), false);
    m.register_parameter("n2", at::zeros({1536}), false);
    m.register_parameter("w3", Weight({512, 1536}, 1536), false);
    m.register_parameter("b3", Bias(512), false);
    m.define(R"(
def forward(self, x):
    h = torch.layer_norm(torch.relu(torch.linear(x, self.w1, self.b1)), [1536], self.g1, self.n1)
    h = torch.layer_norm(torch.relu(torch.linear(h, self.w2, self.b2)), [1536], self.g2, self.n2)
    return torch.linear(h, self.w3, self.b3)
)");
    Write(root, "heavy", m, R"(# 512 -> 1536 -> 1536 -> 512 with ReLU and layer norm (a peer-benchmark model).
description: "MLP 512-1536-1536-512, ReLU and layer norm"
max_batch_size: 64
inputs { name: "x" dtype: FLOAT32 dims: [512] }
outputs { name: "y" dtype: FLOAT32 dims: [512] }
dynamic_batching { max_queue_delay_us: 500 }
warmup: true
)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage =
      "usage: make-demo-models DIR [--with-test-models] [--with-bench-models]\n"
      "Writes mlp, cnn, poly64 and embed into DIR; --with-test-models adds models that fail on purpose (for\n"
      "tests), --with-bench-models the peer benchmark's small and heavy nets.\n";
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cerr << usage;
    return argc < 2 ? 2 : 0;
  }
  fs::path root = argv[1];
  bool test_models = false;
  bool bench_models = false;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--with-test-models") {
      test_models = true;
    } else if (flag == "--with-bench-models") {
      bench_models = true;
    } else {
      std::cerr << "make-demo-models: unknown argument '" << flag << "'\n" << usage;
      return 2;
    }
  }
  try {
    g_gen = at::make_generator<at::CPUGeneratorImpl>(20261122);
    fs::create_directories(root);
    Mlp(root);
    Cnn(root);
    Poly64(root);
    Embed(root);
    // Each set draws from the generator after the demo's, so adding one
    // leaves the others' weights as they were.
    if (test_models) TestModels(root);
    if (bench_models) BenchModels(root);
  } catch (const std::exception& e) {
    std::cerr << "make-demo-models: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
