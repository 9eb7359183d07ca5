// Memory-aware admission through the real server, on a simulated CUDA device
// of 512 MiB with a 256 MiB model cache budget: six models that each need
// about 96 MiB (48 MiB of parameters and as much again at the activation peak of
// a run), of which two fit at a time, are warmed up and then called in turn
// by three clients. A sampler reads the device's memory the whole time, and
// the simulated device's own high-water mark covers the moments between
// samples: neither is ever above the budget. A second start with the same
// state file admits each model by the size the first one learned.

#include <ATen/ops/zeros.h>
#include <stdlib.h>
#include <torch/script.h>

#include <atomic>
#include <filesystem>

#include "tests/integration/server_fixture.h"

namespace infergate::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kModels = 6;
constexpr int64_t kParameterFloats = int64_t{12} << 20;  // 48 MiB in float32
constexpr uint64_t kParameterBytes = uint64_t{48} << 20;
constexpr uint64_t kBudget = uint64_t{256} << 20;

struct Sample {
  uint64_t memory_used = 0;
  uint64_t cache_resident = 0;
  uint64_t memory_peak = 0;
  uint64_t cache_budget = 0;
};

Sample ReadCuda0(v1::InferenceService::Stub& stub) {
  grpc::ClientContext ctx;
  v1::ListDevicesResponse resp;
  Sample s;
  if (!stub.ListDevices(&ctx, v1::ListDevicesRequest(), &resp).ok()) return s;
  for (const v1::DeviceInfo& d : resp.devices()) {
    if (d.id() != "cuda:0") continue;
    s = {d.memory_used_bytes(), d.cache_resident_bytes(), d.memory_peak_bytes(), d.cache_budget_bytes()};
  }
  return s;
}

class AdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ig_admission_XXXXXX";
    dir_ = mkdtemp(pattern);
    // One 48 MiB file, linked into five model folders: five models to the
    // server, one write to the disk.
    torch::jit::Module m("Wide");
    m.register_parameter("w", at::zeros({kParameterFloats}), false);
    m.define(R"(
def forward(self, x):
    h = self.w * 2.0
    return x + h[:4]
)");
    m.save((dir_ / "wide.pt").string());
    for (int i = 0; i < kModels; ++i) {
      fs::path model = dir_ / "models" / ("wide" + std::to_string(i));
      fs::create_directories(model / "1");
      fs::create_hard_link(dir_ / "wide.pt", model / "1" / "model.pt");
      std::ofstream(model / "config.pbtxt") << "inputs { name: \"x\" dtype: FLOAT32 dims: [4] }\n"
                                               "precision: FP32\nwarmup: true\n";
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> Args() const {
    return {"--model-repository=" + (dir_ / "models").string(), "--devices=cpu,cuda:0",
            "--simulate-devices=cuda:0=512MiB", "--cache-budget=cuda:0=256MiB",
            "--state-file=" + (dir_ / "state").string()};
  }

  fs::path dir_;
};

TEST_F(AdmissionTest, ResidentBytesNeverExceedTheBudgetWhileModelsLoadAndARestartUsesLearnedSizes) {
  auto server = ServerProcess::Start(Args(), std::chrono::seconds(300));
  ASSERT_NE(server, nullptr);
  auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  Sample after_warmup = ReadCuda0(*stub);
  ASSERT_EQ(after_warmup.cache_budget, kBudget);

  std::atomic<bool> done{false};
  Sample worst;
  int samples = 0;
  std::thread sampler([&] {
    auto own =
        v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
    while (!done.load()) {
      Sample s = ReadCuda0(*own);
      worst.memory_used = std::max(worst.memory_used, s.memory_used);
      worst.cache_resident = std::max(worst.cache_resident, s.cache_resident);
      ++samples;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::atomic<int> ok{0}, on_cuda{0};
  std::vector<std::string> failures;
  std::mutex failures_mu;
  std::vector<std::thread> clients;
  for (int t = 0; t < 3; ++t) {
    clients.emplace_back([&, t] {
      auto own =
          v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
      for (int i = 0; i < 10; ++i) {
        v1::InferRequest req;
        req.set_model("wide" + std::to_string((t + 2 * i) % kModels));
        req.set_device("cuda:0");
        // DENY: each waits for its model on cuda:0 (with fallback allowed,
        // a model evicted from there would answer from its CPU copy).
        req.set_fallback(v1::DENY);
        *req.add_inputs() = ToWire(at::ones({4}), "x");
        v1::InferResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
        grpc::Status s = own->Infer(&ctx, req, &resp);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(failures_mu);
          failures.push_back(req.model() + ": " + s.error_message());
          continue;
        }
        ok++;
        if (resp.placement().device() == "cuda:0") on_cuda++;
        EXPECT_TRUE(at::equal(FromWire(resp.outputs(0)), at::ones({4})));  // x + 2 * 0
      }
    });
  }
  for (auto& c : clients) c.join();
  done = true;
  sampler.join();
  Sample end = ReadCuda0(*stub);
  std::string log = server->Log();

  EXPECT_TRUE(failures.empty()) << failures.size() << " failed, e.g. " << failures[0];
  EXPECT_EQ(ok.load(), 30);
  // Nothing is refused for want of room: a load waits for nothing and runs
  // where it was asked once idle models have made room.
  EXPECT_EQ(on_cuda.load(), 30);
  std::cout << "samples " << samples << ": highest memory in use " << worst.memory_used << " bytes, cache resident "
            << worst.cache_resident << " bytes; device high-water mark " << end.memory_peak << " bytes; budget "
            << kBudget << " bytes; loads " << Occurrences(log, "admitting ") << ", evictions "
            << Occurrences(log, "bytes): budget") << "\n";
  EXPECT_GT(samples, 20);
  EXPECT_LE(worst.memory_used, kBudget);
  EXPECT_LE(worst.cache_resident, kBudget);
  EXPECT_LE(end.memory_peak, kBudget);
  // The device was really full: two models' parameters at once, and models
  // went and came back (more loads than models).
  EXPECT_GE(end.memory_peak, 2 * kParameterBytes);
  EXPECT_GT(Occurrences(log, "admitting wide"), static_cast<size_t>(kModels));
  EXPECT_GE(Occurrences(log, "bytes): budget"), 3u);
  // First loads are admitted by the estimate from the file, later ones by
  // what the first measured.
  EXPECT_GE(Occurrences(log, "-byte model file)"), static_cast<size_t>(kModels));
  EXPECT_GE(Occurrences(log, "learned from an earlier load)"), 1u);
  ASSERT_EQ(server->Stop(), 0);

  std::ifstream state_in(dir_ / "state");
  std::stringstream state;
  state << state_in.rdbuf();
  EXPECT_EQ(Occurrences(state.str(), "footprint\tcuda\tFLOAT32\twide"), static_cast<size_t>(kModels)) << state.str();

  // Second start, same state file: every model is admitted by its learned
  // size (parameters plus the activation peak) from its first load on.
  auto again = ServerProcess::Start(Args(), std::chrono::seconds(300));
  ASSERT_NE(again, nullptr);
  std::string log2 = again->Log();
  EXPECT_EQ(Occurrences(log2, "-byte model file)"), 0u) << log2;
  EXPECT_GE(Occurrences(log2, "learned from an earlier load)"), static_cast<size_t>(kModels));
  for (int i = 0; i < kModels; ++i) {
    std::string line_start = "admitting wide" + std::to_string(i) + ":1@cuda:0/FLOAT32";
    size_t at = log2.find(line_start);
    ASSERT_NE(at, std::string::npos) << line_start << " in " << log2;
    std::string line = log2.substr(at, log2.find('\n', at) - at);
    std::cout << line << "\n";
    // 48 MiB of parameters and at least as much again at the activation peak.
    EXPECT_NE(line.find(std::to_string(kParameterBytes) + " parameters"), std::string::npos) << line;
    ASSERT_NE(line.find("expects "), std::string::npos) << line;
    uint64_t expects = std::stoull(line.substr(line.find("expects ") + 8));
    EXPECT_GE(expects, 2 * kParameterBytes) << line;
  }
  EXPECT_LE(ReadCuda0(*v1::InferenceService::NewStub(
                          grpc::CreateChannel(again->address(), grpc::InsecureChannelCredentials())))
                .memory_peak,
            kBudget);
}

}  // namespace
}  // namespace infergate::testing
