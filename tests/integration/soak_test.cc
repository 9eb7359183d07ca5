// Soak: many clients for a bounded time, over every protocol the server
// speaks (infergate.v1 Infer, Open Inference ModelInfer and ModelStreamInfer,
// and the Open Inference REST API), mixing valid requests, malformed ones,
// cancelled ones and short deadlines across every demo model. Checks zero
// wrong answers, every malformed request answered with its code, open file
// descriptors flat, and no memory trend: the server's resident memory less
// what its CPU tensor cache holds (up to --cpu-tensor-cache, 256 MiB, kept
// on purpose) is sampled every two seconds, and neither its growth over the
// run nor the trend of the run's second half may add up to a leak.
//
// INFERGATE_SOAK_SECONDS (default 90) sets the length of the measured part.

#include <ATen/ops/allclose.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "inference/grpc_service.grpc.pb.h"
#include "infergate/v1/inference.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/integration/rest_connection.h"
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

// What the tensor cache holds now, in KiB, from /metrics (0 when it is off
// or the scrape failed). Read in process: forking curl while the clients
// run LibTorch deadlocked in OpenBLAS's fork handler.
uint64_t TensorCacheKib(const ServerProcess& server) {
  RestConnection connection(server.metrics_address());
  const double bytes = MetricValue(connection.Call("GET", "/metrics").body, "infergate_cpu_tensor_cache_bytes");
  return std::isnan(bytes) ? 0 : static_cast<uint64_t>(bytes) / 1024;
}

// Least-squares slope of ys over xs.
double Slope(const std::vector<double>& xs, const std::vector<double>& ys) {
  const double n = static_cast<double>(xs.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    sx += xs[i];
    sy += ys[i];
    sxx += xs[i] * xs[i];
    sxy += xs[i] * ys[i];
  }
  const double den = n * sxx - sx * sx;
  return den == 0 ? 0 : (n * sxy - sx * sy) / den;
}

// The mlp's 1-4 rows as an Open Inference request, typed contents.
inference::ModelInferRequest OpenInferenceMlp(const at::Tensor& x) {
  inference::ModelInferRequest req;
  req.set_model_name("mlp");
  auto* in = req.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  for (int64_t d : x.sizes()) in->add_shape(d);
  const at::Tensor c = x.contiguous();
  in->mutable_contents()->mutable_fp32_contents()->Add(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  return req;
}

// outputs[0] of an Open Inference answer (FP32, raw contents); undefined
// when it is not that.
at::Tensor OpenInferenceOutput(const inference::ModelInferResponse& resp) {
  if (resp.outputs_size() < 1 || resp.raw_output_contents_size() < 1 || resp.outputs(0).datatype() != "FP32") {
    return at::Tensor();
  }
  std::vector<int64_t> shape(resp.outputs(0).shape().begin(), resp.outputs(0).shape().end());
  const std::string& raw = resp.raw_output_contents(0);
  at::Tensor t = at::empty(shape, at::kFloat);
  if (static_cast<size_t>(t.numel()) * sizeof(float) != raw.size()) return at::Tensor();
  std::memcpy(t.data_ptr<float>(), raw.data(), raw.size());
  return t;
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
      {"embed",
       "ids",
       [](std::mt19937&) { return at::randint(0, 100, {2, 8}, at::TensorOptions().dtype(at::kLong)); },
       {}},
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
  // A valid call that failed: counted, and the first few described.
  auto note_unexpected = [&](const std::string& what) {
    unexpected++;
    std::lock_guard<std::mutex> lock(codes_mu);
    if (unexpected_examples.size() < 2000) unexpected_examples += what + "\n";
  };
  // PyTorch's own answer for `x`, one at a time.
  auto reference = [&](Model& m, const at::Tensor& x) {
    std::lock_guard<std::mutex> lock(ref_mu);
    c10::InferenceMode guard;
    return m.module.forward({x}).toTensor();
  };
  auto client = [&](int id) {
    std::mt19937 rng(id);
    auto stub =
        v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
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
          note_unexpected(m.name + " kind " + std::to_string(kind) + ": " +
                          std::to_string(static_cast<int>(s.error_code())) + " " + s.error_message());
        }
        continue;
      }
      ok++;
      const at::Tensor want = reference(m, x);
      at::Tensor got = FromWire(resp.outputs(0));
      bool half = resp.placement().dtype() == v1::FLOAT16 || resp.placement().dtype() == v1::BFLOAT16;
      double tol = half ? 0.1 : 1e-4;
      if (got.sizes() != want.sizes() || !at::allclose(got, want.to(got.scalar_type()), tol, tol)) wrong++;
    }
  };

  // The Open Inference clients send the mlp on the CPU (FP32: exact
  // answers), and one malformed request in eight (a shape its data does not
  // fill), which must be refused with its code and leave the stream open.
  auto mlp_reference = [&](const at::Tensor& x) { return reference(models[0], x); };
  auto right = [](const at::Tensor& got, const at::Tensor& want) {
    return got.defined() && got.sizes() == want.sizes() && at::allclose(got, want, 1e-4, 1e-4);
  };
  auto open_inference_request = [&](std::mt19937& rng, at::Tensor* x, bool* malformed) {
    *x = at::randn({1 + static_cast<int64_t>(rng() % 4), 256});
    inference::ModelInferRequest req = OpenInferenceMlp(*x);
    (*req.mutable_parameters())["device"].set_string_param("cpu");
    *malformed = rng() % 8 == 0;
    if (*malformed) req.mutable_inputs(0)->set_shape(1, 255);
    return req;
  };
  std::atomic<uint64_t> open_inference_ok{0}, stream_ok{0}, rest_ok{0};
  auto open_inference_client = [&](int id) {
    std::mt19937 rng(1000 + id);
    auto stub = inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
    while (!stop.load()) {
      at::Tensor x;
      bool malformed = false;
      const inference::ModelInferRequest req = open_inference_request(rng, &x, &malformed);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      inference::ModelInferResponse resp;
      sent++;
      const grpc::Status s = stub->ModelInfer(&ctx, req, &resp);
      count(s.error_code());
      if (malformed) {
        (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? malformed_ok : malformed_wrong_code)++;
      } else if (!s.ok()) {
        note_unexpected("ModelInfer: " + std::to_string(static_cast<int>(s.error_code())) + " " + s.error_message());
      } else {
        (right(OpenInferenceOutput(resp), mlp_reference(x)) ? ok : wrong)++;
        open_inference_ok++;
      }
    }
  };
  auto stream_client = [&](int id) {
    std::mt19937 rng(2000 + id);
    auto stub = inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
    while (!stop.load()) {  // a stream of up to 200 requests, then a new one
      grpc::ClientContext ctx;
      auto stream = stub->ModelStreamInfer(&ctx);
      for (int i = 0; i < 200 && !stop.load(); ++i) {
        at::Tensor x;
        bool malformed = false;
        const inference::ModelInferRequest req = open_inference_request(rng, &x, &malformed);
        inference::ModelStreamInferResponse resp;
        sent++;
        if (!stream->Write(req) || !stream->Read(&resp)) {
          note_unexpected("ModelStreamInfer: the stream broke");
          break;
        }
        if (malformed) {
          (!resp.error_message().empty() ? malformed_ok : malformed_wrong_code)++;
        } else if (!resp.error_message().empty()) {
          note_unexpected("ModelStreamInfer: " + resp.error_message());
        } else {
          (right(OpenInferenceOutput(resp.infer_response()), mlp_reference(x)) ? ok : wrong)++;
          stream_ok++;
        }
      }
      stream->WritesDone();
      if (const grpc::Status s = stream->Finish(); !s.ok()) {
        note_unexpected("ModelStreamInfer ended " + std::to_string(static_cast<int>(s.error_code())) + " " +
                        s.error_message());
      }
    }
  };
  auto rest_client = [&](int id) {
    std::mt19937 rng(3000 + id);
    RestConnection rest(server->http_address());
    while (!stop.load()) {
      const at::Tensor x = at::randn({1 + static_cast<int64_t>(rng() % 4), 256});
      const bool malformed = rng() % 8 == 0;
      nlohmann::json body = {{"parameters", {{"device", "cpu"}}},
                             {"inputs",
                              {{{"name", "x"},
                                {"shape", {x.size(0), malformed ? 255 : 256}},
                                {"datatype", "FP32"},
                                {"data", std::vector<float>(x.data_ptr<float>(), x.data_ptr<float>() + x.numel())}}}}};
      sent++;
      const RestAnswer answer = rest.Call("POST", "/v2/models/mlp/infer", body.dump());
      if (malformed) {
        (answer.status == 400 ? malformed_ok : malformed_wrong_code)++;
        continue;
      }
      if (answer.status != 200) {
        note_unexpected("REST: " + std::to_string(answer.status) + " " + answer.body.substr(0, 200));
        continue;
      }
      const nlohmann::json got = nlohmann::json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
      at::Tensor y;
      if (got.is_object() && got.contains("outputs") && !got["outputs"].empty()) {
        const std::vector<float> data = got["outputs"][0].value("data", std::vector<float>());
        const std::vector<int64_t> shape = got["outputs"][0].value("shape", std::vector<int64_t>());
        if (!shape.empty()) {
          y = at::empty(shape, at::kFloat);
          if (static_cast<size_t>(y.numel()) == data.size()) {
            std::copy(data.begin(), data.end(), y.data_ptr<float>());
          } else {
            y = at::Tensor();
          }
        }
      }
      (right(y, mlp_reference(x)) ? ok : wrong)++;
      rest_ok++;
    }
  };

  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) clients.emplace_back(client, i);
  for (int i = 0; i < 2; ++i) clients.emplace_back(open_inference_client, i);
  clients.emplace_back(stream_client, 0);
  clients.emplace_back(rest_client, 0);
  std::this_thread::sleep_for(std::chrono::seconds(10));  // warm-up: models load, caches fill
  // Memory every two seconds: resident, and resident less the tensor cache.
  std::vector<double> at_s, net_mib;
  std::string memory_samples;
  const auto measured_from = std::chrono::steady_clock::now();
  int fds_start = OpenFds(server->pid());
  uint64_t sent_start = sent.load();
  for (int i = 0; i * 2 <= seconds; ++i) {
    std::this_thread::sleep_until(measured_from + std::chrono::seconds(2 * i));
    const uint64_t rss = ProcStatusKib(server->pid(), "VmRSS:");
    const uint64_t cache = TensorCacheKib(*server);
    at_s.push_back(2.0 * i);
    net_mib.push_back((static_cast<double>(rss) - static_cast<double>(cache)) / 1024.0);
    memory_samples += " " + std::to_string(rss / 1024) + "-" + std::to_string(cache / 1024);
  }
  int fds_end = OpenFds(server->pid());
  stop = true;
  for (auto& t : clients) t.join();
  const size_t half = net_mib.size() / 2;
  const double growth_mib = net_mib.back() - net_mib.front();
  const double late_trend_mib = Slope(std::vector<double>(at_s.begin() + half, at_s.end()),
                                      std::vector<double>(net_mib.begin() + half, net_mib.end())) *
                                (at_s.back() - at_s[half]);

  std::ostringstream summary;
  summary << "soak " << seconds << " s after 10 s warm-up: " << sent.load() - sent_start << " requests measured, "
          << sent.load() << " in all; ok " << ok.load() << ", wrong " << wrong.load() << ", malformed answered right "
          << malformed_ok.load() << ", wrong code " << malformed_wrong_code.load() << ", valid calls that failed "
          << unexpected.load() << "; codes";
  for (const auto& [code, n] : codes) summary << " " << code << "=" << n;
  summary << "; answered right over Open Inference " << open_inference_ok.load() << ", stream " << stream_ok.load()
          << ", REST " << rest_ok.load() << "; resident less tensor cache " << net_mib.front() << " -> "
          << net_mib.back() << " MiB (growth " << growth_mib << ", second half's trend " << late_trend_mib
          << "); samples (resident-cache MiB):" << memory_samples << "; fds " << fds_start << " -> " << fds_end;
  std::cout << summary.str() << std::endl;
  RecordProperty("summary", summary.str());

  EXPECT_TRUE(server->Alive());
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(malformed_wrong_code.load(), 0u);
  EXPECT_EQ(unexpected.load(), 0u) << unexpected_examples;
  EXPECT_GT(ok.load(), 1000u);
  EXPECT_GT(open_inference_ok.load(), 0u);
  EXPECT_GT(stream_ok.load(), 0u);
  EXPECT_GT(rest_ok.load(), 0u);
  // No leak: memory less the tensor cache grows by at most 32 MiB over the
  // run (allocator arenas still settle), and its trend over the second half
  // adds up to at most 16 MiB. The same descriptors, give or take a few
  // connections in flux.
  EXPECT_LE(growth_mib, 32.0) << summary.str();
  EXPECT_LE(late_trend_mib, 16.0) << summary.str();
  EXPECT_LE(std::abs(fds_end - fds_start), 8) << summary.str();
  EXPECT_EQ(server->Stop(), 0);
}

}  // namespace
}  // namespace infergate::testing
