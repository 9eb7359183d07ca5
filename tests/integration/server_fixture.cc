#include "tests/integration/server_fixture.h"

#include <ATen/Parallel.h>
#include <sys/stat.h>
#include <torch/script.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "devices/system_info.h"

namespace infergate::testing {
namespace {

// The test process is the servers' client: what it computes itself (inputs,
// references) is small, and with LibTorch's default of one OpenMP thread
// per core (and the BLAS's own pool), sixteen client threads each starting
// a parallel region spin against each other on two cores (StressTest took
// 90 s instead of 33).
const bool kOneIntraOpThread = [] {
  at::set_num_threads(1);
  SetBlasThreads(1);
  return true;
}();

}  // namespace

at::Tensor Reference(const std::string& model, const std::vector<at::Tensor>& inputs, int version) {
  // Loaded once per thread and file (its size and modification time name
  // it, so a test that rewrites a model gets the new one): a stress test
  // checks thousands of answers, and loading the file for each took most
  // of its time. Per thread, so no module runs on two threads at once.
  using FileKey = std::tuple<std::string, off_t, time_t, long>;
  thread_local std::map<FileKey, torch::jit::Module> loaded;
  const std::string path = DemoRepository() + "/" + model + "/" + std::to_string(version) + "/model.pt";
  struct stat file{};
  if (stat(path.c_str(), &file) != 0) throw std::runtime_error("Reference: no model file " + path);
  const FileKey key{path, file.st_size, file.st_mtim.tv_sec, file.st_mtim.tv_nsec};
  auto it = loaded.find(key);
  if (it == loaded.end()) {
    torch::jit::Module m = torch::jit::load(path);
    m.eval();
    it = loaded.emplace(key, std::move(m)).first;
  }
  c10::InferenceMode guard;
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  return it->second.forward(args).toTensor();
}

namespace {

// A model directory whose model multiplies a `side` x `side` matrix of
// `scale` by itself `count` (TorchScript) times, scaling each product by
// `scale`, holds `weight_floats` FP32 weights (none when 0), and answers x.
// `config` is its whole config.pbtxt, which serves it as saved.
void WriteProductLoopModel(const std::filesystem::path& dir, const std::string& count, int side,
                           const std::string& scale, int64_t weight_floats, const std::string& config) {
  torch::jit::Module m("MatrixProducts");
  if (weight_floats > 0) m.register_parameter("w", torch::zeros({weight_floats}), /*is_buffer=*/false);
  m.define(absl::StrCat("def forward(self, x):\n    y = torch.ones([", side, ", ", side, "]) * ", scale,
                        "\n    for _ in range(", count, "):\n        y = torch.mm(y, y) * ", scale,
                        "\n    return x + (torch.sum(y)", weight_floats > 0 ? " + torch.sum(self.w)" : "",
                        ") * 0.0\n"));
  std::filesystem::create_directories(dir / "1");
  m.save((dir / "1" / "model.pt").string());
  // Served as saved: the optimization's check would run the products twice
  // more at every load (these tests time their calls, not the load), and
  // the optimized module would fold products of constants away.
  std::ofstream(dir / "config.pbtxt") << "torchscript_optimization: TORCHSCRIPT_OPTIMIZE_OFF\n" << config;
}

constexpr const char* kAnyLengthInput = "inputs { name: \"x\" dtype: FLOAT32 dims: [-1] }\n";

}  // namespace

void WriteMatrixProductModel(const std::filesystem::path& dir, int products, const std::string& config) {
  WriteProductLoopModel(dir, std::to_string(products), 1024, "0.001", 0, kAnyLengthInput + config);
}

void WriteSizedMatrixProductModel(const std::filesystem::path& dir, const std::string& config) {
  WriteProductLoopModel(dir, "x.numel()", 1024, "0.001", 0, kAnyLengthInput + config);
}

void WriteWeightedMatrixProductModel(const std::filesystem::path& dir, int products, const std::string& config) {
  WriteProductLoopModel(dir, std::to_string(products), 256, "0.01", 256 * 1024, config);
}

}  // namespace infergate::testing
