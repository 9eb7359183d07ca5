// Soak: many clients for a bounded time, mixing valid requests, malformed
// ones, cancelled ones and short deadlines across every demo model. Checks
// zero wrong answers, every malformed request answered with its code, and
// server RSS and open file descriptors flat after warm-up.
//
// INFERGATE_SOAK_SECONDS (default 90) sets the length of the measured part.

#include <ATen/ops/allclose.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <torch/script.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "infergate/v1/inference.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/integration/wire_tensors.h"

namespace infergate::testing {
namespace {

int OpenFds(pid_t pid) {
  int n = 0;
  DIR* dir = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (!dir) return -1;
  while (dirent* e = readdir(dir)) n += e->d_name[0] != '.';
  closedir(dir);
  return n;
}

struct Model {
  std::string name, input;
  std::function<at::Tensor(std::mt19937&)> make;
  torch::jit::Module module;
};

TEST(Soak, MixedTrafficKeepsAnswersRightAndResourcesFlat) {
  const char* env = std::getenv("INFERGATE_SOAK_SECONDS");
  const int seconds = env ? std::atoi(env) : 90;
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--simulate-devices=mps,cuda:0",
                                      "--simulate-mps-unsupported-ops=aten::max_pool2d"});
  ASSERT_NE(server, nullptr);
  std::vector<Model> models = {
      {"mlp", "x", [](std::mt19937& r) { return at::randn({1 + static_cast<int64_t>(r() % 4), 256}); }, {}},
      {"cnn", "image", [](std::mt19937&) { return at::randn({1, 3, 64, 64}); }, {}},
      {"embed", "ids", [](std::mt19937&) { return at::randint(0, 100, {2, 8}, at::TensorOptions().dtype(at::kLong)); }, {}},
      {"poly64", "x", [](std::mt19937&) { return at::randn({3, 4}, at::TensorOptions().dtype(at::kDouble)); }, {}},
  };
  for (Model& m : models) {
    m.module = torch::jit::load(DemoRepository() + "/" + m.name + "/1/model.pt");
    m.module.eval();
  }
  std::mutex ref_mu;  // torch::jit::Module::forward is not for concurrent use from many threads here
  const char* devices[] = {"", "cpu", "mps", "cuda:0"};

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> sent{0}, ok{0}, wrong{0}, malformed_ok{0}, malformed_wrong_code{0}, unexpected{0};
  std::string unexpected_examples;
  std::mutex codes_mu;
  std::map<std::string, uint64_t> codes;
  auto count = [&](grpc::StatusCode c) {
    std::lock_guard<std::mutex> lock(codes_mu);
    codes[std::to_string(static_cast<int>(c))]++;
  };
  auto client = [&](int id) {
    std::mt19937 rng(id);
    auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
    while (!stop.load()) {
      Model& m = models[rng() % models.size()];
      at::Tensor x = m.make(rng);
      v1::InferRequest req;
      req.set_model(m.name);
      req.set_device(devices[rng() % 4]);
      *req.add_inputs() = ToWire(x, m.input);
      int kind = static_cast<int>(rng() % 10);  // 0-5 valid, 6-7 malformed, 8 cancelled, 9 short deadline
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      grpc::StatusCode expected = grpc::StatusCode::OK;
      if (kind == 6) {
        req.mutable_inputs(0)->mutable_data()->resize(3);
        expected = grpc::StatusCode::INVALID_ARGUMENT;
      } else if (kind == 7) {
        req.set_model("no-such-model");
        expected = grpc::StatusCode::NOT_FOUND;
      } else if (kind == 9) {
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::microseconds(200 + rng() % 2000));
      }
      v1::InferResponse resp;
      sent++;
      grpc::Status s;
      if (kind == 8) {
        std::thread canceller([&ctx, us = 100 + rng() % 3000] {
          std::this_thread::sleep_for(std::chrono::microseconds(us));
          ctx.TryCancel();
        });
        s = stub->Infer(&ctx, req, &resp);
        canceller.join();
      } else {
        s = stub->Infer(&ctx, req, &resp);
      }
      count(s.error_code());
      if (kind == 6 || kind == 7) {
        (s.error_code() == expected ? malformed_ok : malformed_wrong_code)++;
        continue;
      }
      // A valid call must succeed; a cancelled one may also end CANCELLED and
      // one with a short deadline DEADLINE_EXCEEDED. Anything else is a fault.
      const bool excused = (kind == 8 && s.error_code() == grpc::StatusCode::CANCELLED) ||
                           (kind == 9 && s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
      if (!s.ok()) {
        if (!excused) {
          unexpected++;
          std::lock_guard<std::mutex> lock(codes_mu);
          if (unexpected_examples.size() < 2000) {
            unexpected_examples += m.name + " kind " + std::to_string(kind) + ": " +
                                   std::to_string(static_cast<int>(s.error_code())) + " " + s.error_message() + "\n";
          }
        }
        continue;
      }
      ok++;
      at::Tensor want;
      {
        std::lock_guard<std::mutex> lock(ref_mu);
        c10::InferenceMode guard;
        want = m.module.forward({x}).toTensor();
      }
      at::Tensor got = FromWire(resp.outputs(0));
      bool half = resp.placement().dtype() == v1::FLOAT16 || resp.placement().dtype() == v1::BFLOAT16;
      double tol = half ? 0.1 : 1e-4;
      if (got.sizes() != want.sizes() || !at::allclose(got, want.to(got.scalar_type()), tol, tol)) wrong++;
    }
  };

  std::vector<std::thread> clients;
  for (int i = 0; i < 12; ++i) clients.emplace_back(client, i);
  std::this_thread::sleep_for(std::chrono::seconds(10));  // warm-up: models load, caches fill
  uint64_t rss_start = ProcStatusKib(server->pid(), "VmRSS:");
  int fds_start = OpenFds(server->pid());
  uint64_t sent_start = sent.load();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  uint64_t rss_end = ProcStatusKib(server->pid(), "VmRSS:");
  int fds_end = OpenFds(server->pid());
  stop = true;
  for (auto& t : clients) t.join();

  std::ostringstream summary;
  summary << "soak " << seconds << " s after 10 s warm-up: " << sent.load() - sent_start << " requests measured, "
          << sent.load() << " in all; ok " << ok.load() << ", wrong " << wrong.load() << ", malformed answered right "
          << malformed_ok.load() << ", wrong code " << malformed_wrong_code.load() << ", valid calls that failed "
          << unexpected.load() << "; codes";
  for (const auto& [code, n] : codes) summary << " " << code << "=" << n;
  summary << "; RSS " << rss_start / 1024 << " -> " << rss_end / 1024 << " MiB; fds " << fds_start << " -> "
          << fds_end;
  std::cout << summary.str() << std::endl;
  RecordProperty("summary", summary.str());

  EXPECT_TRUE(server->Alive());
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(malformed_wrong_code.load(), 0u);
  EXPECT_EQ(unexpected.load(), 0u) << unexpected_examples;
  EXPECT_GT(ok.load(), 1000u);
  // Flat: at most 64 MiB of growth after warm-up, and the same descriptors
  // give or take a few connections in flux.
  EXPECT_LE(rss_end, rss_start + 64 * 1024) << summary.str();
  EXPECT_LE(std::abs(fds_end - fds_start), 8) << summary.str();
  EXPECT_EQ(server->Stop(), 0);
}

}  // namespace
}  // namespace infergate::testing
