#pragma once
// The fixture integration tests share: a real server started on a loopback
// ephemeral port with the demo models, a gRPC stub to it, and the same
// model.pt run in this process as the reference answer.

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "devices/torch_dtype.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "inference/grpc_service.pb.h"
#include "infergate/v1/inference.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/integration/wire_tensors.h"

namespace infergate::testing {

// A [1, 256] FP32 request for the demo mlp, in the Open Inference Protocol.
inline inference::ModelInferRequest MlpV2Request() {
  inference::ModelInferRequest req;
  req.set_model_name("mlp");
  auto* in = req.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(256);
  std::vector<float> values(256, 0.5f);
  req.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return req;
}

// The same model.pt run in this process: what the server must agree with.
// (server_fixture.cc: TorchScript's headers, the heaviest of all, are
// parsed there once, not by every test that includes this.)
at::Tensor Reference(const std::string& model, const std::vector<at::Tensor>& inputs, int version = 1);

// A model directory (version 1 and its config) whose model does `products`
// 1024x1024 matrix products per call, whatever its input x (FLOAT32, any
// length), and answers x; the demo repository's `slow` does 64, about a
// second here. `config` is added to the config's input declaration.
void WriteMatrixProductModel(const std::filesystem::path& dir, int products, const std::string& config);
// The same, but the model does as many products as x has elements: a
// call's length is the caller's choice (x of 64 elements, about a second;
// of one, a few milliseconds), and the load's warm-up is short.
void WriteSizedMatrixProductModel(const std::filesystem::path& dir, const std::string& config);
// A model directory whose model holds 1 MiB of weights (FP32) and does
// `products` 256x256 matrix products per call (a few hundred microseconds
// each here), answering x: models of one size whose calls cost what the
// caller says, served as saved (not optimized). `config` is the rest of its
// config.pbtxt.
void WriteWeightedMatrixProductModel(const std::filesystem::path& dir, int products, const std::string& config);

// Polls ListDevices (up to 30 s) until some device satisfies `running`;
// false if none did. Synchronises a test with work it started.
inline bool WaitForDevice(v1::InferenceService::Stub& stub, const std::function<bool(const v1::DeviceInfo&)>& running) {
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       std::chrono::steady_clock::now() < deadline;) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListDevicesResponse devices;
    if (stub.ListDevices(&ctx, v1::ListDevicesRequest(), &devices).ok()) {
      for (const auto& d : devices.devices()) {
        if (running(d)) return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// Whether some request is running on some device.
inline bool SomethingInFlight(const v1::DeviceInfo& d) { return d.in_flight() > 0; }

// Whether this build can check memory bounds (RSS, the CPU tensor cache):
// not under AddressSanitizer, which keeps freed memory in quarantine and
// replaces the allocator. A run that skips them must say it is a sanitizer
// run (INFERGATE_SANITIZER_RUN=1, as tests/run.sh's ASan suite does, whose
// plain build then checks them); otherwise the skip is a failure, so that
// no memory bound goes unchecked in every build a run makes.
inline bool MemoryBoundsApply() {
#if defined(__SANITIZE_ADDRESS__)
  const char* flagged = std::getenv("INFERGATE_SANITIZER_RUN");
  if (flagged == nullptr || std::string(flagged) != "1") {
    ADD_FAILURE() << "built with AddressSanitizer, where memory bounds cannot be checked, and the run does not say "
                     "it is a sanitizer run (INFERGATE_SANITIZER_RUN=1): the bounds would go unchecked";
  } else {
    std::printf("memory bound not checked under AddressSanitizer (a sanitizer run: the plain build checks it)\n");
  }
  return false;
#else
  return true;
#endif
}

// `service`'s health as a new connection to `address` asks it ("" is
// readiness, "liveness" liveness); UNKNOWN when the call fails.
inline grpc::health::v1::HealthCheckResponse::ServingStatus HealthStatus(
    const std::string& address, const std::string& service,
    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  if (!health->Check(&ctx, req, &resp).ok()) return grpc::health::v1::HealthCheckResponse::UNKNOWN;
  return resp.status();
}

class ServerTest : public ::testing::Test {
 protected:
  virtual std::vector<std::string> ExtraArgs() const { return {}; }

  void SetUp() override {
    std::vector<std::string> args = {"--model-repository=" + DemoRepository()};
    bool devices_chosen = false;
    for (const std::string& a : ExtraArgs()) {
      args.push_back(a);
      devices_chosen |= a.rfind("--devices", 0) == 0 || a.rfind("--simulate-devices", 0) == 0;
    }
    // The answers these tests expect are the CPU's: say so, rather than
    // assume the machine has no GPU (auto would pick a real one).
    if (!devices_chosen) args.push_back("--devices=cpu");
    server_ = ServerProcess::Start(args);
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = v1::InferenceService::NewStub(channel_);
  }
  void TearDown() override {
    // An idle client connection holds a graceful shutdown for gRPC's GOAWAY
    // ping timeout; close ours first so the test measures the server.
    stub_.reset();
    channel_.reset();
    if (server_) {
      EXPECT_EQ(server_->Stop(), 0) << "server did not exit cleanly on SIGTERM";
    }
  }

  grpc::Status Infer(const v1::InferRequest& req, v1::InferResponse* resp, int timeout_ms = 30000) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    return stub_->Infer(&ctx, req, resp);
  }

  v1::InferRequest Request(const std::string& model, std::vector<std::pair<std::string, at::Tensor>> inputs) {
    v1::InferRequest req;
    req.set_model(model);
    for (auto& [name, t] : inputs) *req.add_inputs() = ToWire(t, name);
    return req;
  }

  // Runs `model` through the server and in-process; they must agree.
  void ExpectAgreement(const std::string& model, std::vector<std::pair<std::string, at::Tensor>> inputs,
                       v1::DataType out_dtype) {
    v1::InferResponse resp;
    grpc::Status s = Infer(Request(model, inputs), &resp);
    ASSERT_TRUE(s.ok()) << model << ": " << s.error_message();
    ASSERT_EQ(resp.outputs_size(), 1) << model;
    EXPECT_EQ(resp.outputs(0).dtype(), out_dtype) << model;
    std::vector<at::Tensor> raw;
    for (auto& [name, t] : inputs) raw.push_back(t);
    at::Tensor expected = Reference(model, raw);
    at::Tensor got = FromWire(resp.outputs(0));
    ASSERT_EQ(got.sizes(), expected.sizes()) << model;
    EXPECT_TRUE(at::allclose(got, expected.to(got.scalar_type()), 1e-5, 1e-5)) << model;
    EXPECT_EQ(resp.placement().device(), "cpu");
    EXPECT_FALSE(resp.placement().fell_back());
    EXPECT_GT(resp.timing().compute_us(), 0u);
    EXPECT_GE(resp.timing().total_us(), resp.timing().compute_us());
  }

  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::InferenceService::Stub> stub_;
};

}  // namespace infergate::testing
