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

// The model directory of WriteMatrixProductModel, whose loop runs `count`
// (TorchScript) times.
void WriteProductLoopModel(const std::filesystem::path& dir, const std::string& count, const std::string& config) {
  torch::jit::Module m("MatrixProducts");
  m.define(absl::StrCat(R"(
def forward(self, x):
    y = torch.ones([1024, 1024]) * 0.001
    for _ in range()",
                        count, R"():
        y = torch.mm(y, y) * 0.001
    return x + torch.sum(y) * 0.0
)"));
  std::filesystem::create_directories(dir / "1");
  m.save((dir / "1" / "model.pt").string());
  // Served as saved: the optimization's check would run the products twice
  // more at every load, and these tests time their calls, not the load.
  std::ofstream(dir / "config.pbtxt") << "inputs { name: \"x\" dtype: FLOAT32 dims: [-1] }\n"
                                      << "torchscript_optimization: TORCHSCRIPT_OPTIMIZE_OFF\n"
                                      << config;
}

}  // namespace

void WriteMatrixProductModel(const std::filesystem::path& dir, int products, const std::string& config) {
  WriteProductLoopModel(dir, std::to_string(products), config);
}

void WriteSizedMatrixProductModel(const std::filesystem::path& dir, const std::string& config) {
  WriteProductLoopModel(dir, "x.numel()", config);
}

void WriteWeightedMatrixProductModel(const std::filesystem::path& dir, int products, const std::string& config) {
  torch::jit::Module m("WeightedMatrixProducts");
  m.register_parameter("w", torch::zeros({256 * 1024}), /*is_buffer=*/false);
  m.define(absl::StrCat(R"(
def forward(self, x):
    y = torch.ones([256, 256]) * 0.01
    for _ in range()",
                        products, R"():
        y = torch.mm(y, y) * 0.01
    return x + (torch.sum(y) + torch.sum(self.w)) * 0.0
)"));
  std::filesystem::create_directories(dir / "1");
  m.save((dir / "1" / "model.pt").string());
  // Served as saved: optimized, its products (on constants) would be folded away.
  std::ofstream(dir / "config.pbtxt") << "torchscript_optimization: TORCHSCRIPT_OPTIMIZE_OFF\n" << config;
}

}  // namespace infergate::testing
