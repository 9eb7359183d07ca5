// Simulated accelerators, precision, fallback, learned limits and memory through the real server.

#include <atomic>
#include <cmath>
#include <thread>

#include "inference/grpc_service.grpc.pb.h"
#include "tests/common/scratch_dir.h"
#include "tests/integration/server_fixture.h"

namespace infergate::testing {
namespace {

class SimulatedDevicesTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override {
    return {"--simulate-devices=mps,cuda:0@7.5", "--simulate-mps-unsupported-ops=aten::max_pool2d"};
  }

  v1::InferResponse Run(v1::InferRequest req, grpc::StatusCode expect = grpc::StatusCode::OK) {
    v1::InferResponse resp;
    grpc::Status s = Infer(req, &resp);
    EXPECT_EQ(s.error_code(), expect) << s.error_message();
    return resp;
  }

  // Runs `req` until its dtype has passed its accuracy check: until then a
  // request runs in a verified dtype with the reason "unverified:<dtype>".
  v1::InferResponse RunVerified(const v1::InferRequest& req) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    v1::InferResponse resp = Run(req);
    while (resp.placement().precision_reason().rfind("unverified:", 0) == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      resp = Run(req);
    }
    return resp;
  }
};

TEST_F(SimulatedDevicesTest, ListDevicesShowsThreeWithTwoSimulated) {
  grpc::ClientContext ctx;
  v1::ListDevicesResponse resp;
  ASSERT_TRUE(stub_->ListDevices(&ctx, v1::ListDevicesRequest(), &resp).ok());
  ASSERT_EQ(resp.devices_size(), 3);
  std::map<std::string, v1::DeviceInfo> by_id;
  for (const auto& d : resp.devices()) by_id[d.id()] = d;
  ASSERT_TRUE(by_id.count("cuda:0") && by_id.count("mps") && by_id.count("cpu"));
  EXPECT_TRUE(by_id["cuda:0"].simulated());
  EXPECT_TRUE(by_id["mps"].simulated());
  EXPECT_FALSE(by_id["cpu"].simulated());
  EXPECT_EQ(by_id["cuda:0"].kind(), v1::CUDA);
  EXPECT_EQ(by_id["cuda:0"].compute_capability(), "7.5");
  EXPECT_EQ(by_id["cuda:0"].default_precision(), v1::FP16);
  EXPECT_EQ(by_id["mps"].default_precision(), v1::FP16);
  EXPECT_GT(by_id["cuda:0"].memory_total_bytes(), 0u);
  // Warm-up models went to cuda:0, the first device on a cold start, and
  // their parameters count against its memory.
  EXPECT_GT(by_id["cuda:0"].memory_used_bytes(), 0u);
  for (const auto& d : resp.devices()) {
    EXPECT_FALSE(d.name().empty());
    EXPECT_TRUE(d.available());
    EXPECT_GT(d.supported_dtypes_size(), 0);
  }
  for (int t : by_id["mps"].supported_dtypes()) EXPECT_NE(t, v1::FLOAT64);
  for (int t : by_id["cuda:0"].supported_dtypes()) EXPECT_NE(t, v1::BFLOAT16);
}

TEST_F(SimulatedDevicesTest, Float64InputRunsOnMpsAsFloat32) {
  at::Tensor x = at::randn({2, 4}, at::TensorOptions().dtype(at::kDouble));
  v1::InferRequest req = Request("poly64", {{"x", x}});
  req.set_device("mps");
  v1::InferResponse resp = Run(req);
  EXPECT_EQ(resp.placement().device(), "mps");
  EXPECT_EQ(resp.placement().dtype(), v1::FLOAT32);
  EXPECT_FALSE(resp.placement().fell_back());
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_EQ(resp.outputs(0).dtype(), v1::FLOAT64);  // the declared output dtype
  EXPECT_TRUE(at::allclose(FromWire(resp.outputs(0)), Reference("poly64", {x}), 1e-4, 1e-4));
}

// A user's model ending in `self.fc(x) * 0.5` runs on (simulated) MPS like
// on real MPS: the Python float is a wrapped-number scalar, not float64.
TEST_F(SimulatedDevicesTest, PythonNumberArithmeticRunsOnMpsWithoutFallback) {
  at::Tensor x = at::randn({3, 8});
  v1::InferRequest req = Request("half_linear", {{"x", x}});
  req.set_device("mps");
  req.set_fallback(v1::DENY);
  v1::InferResponse resp = Run(req);
  EXPECT_EQ(resp.placement().device(), "mps");
  EXPECT_FALSE(resp.placement().fell_back());
  EXPECT_EQ(resp.placement().fallback_reason(), "");
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_TRUE(at::allclose(FromWire(resp.outputs(0)), Reference("half_linear", {x}), 1e-2, 1e-2));
}

// Float64 the model makes while it runs is what MPS refuses: the request
// reruns on the CPU with reason dtype:float64, later ones go there at once,
// and with DENY the client gets FAILED_PRECONDITION naming float64.
TEST_F(SimulatedDevicesTest, Float64MadeInsideTheModelFallsBackFromMpsWithDtypeFloat64) {
  at::Tensor x = at::randn({2, 4});
  v1::InferRequest req = Request("doubles", {{"x", x}});
  req.set_device("mps");
  for (int i = 0; i < 2; ++i) {
    v1::InferResponse resp = Run(req);
    EXPECT_EQ(resp.placement().device(), "cpu");
    EXPECT_TRUE(resp.placement().fell_back());
    EXPECT_EQ(resp.placement().fallback_reason(), "dtype:float64");
    ASSERT_EQ(resp.outputs_size(), 1);
    EXPECT_TRUE(at::allclose(FromWire(resp.outputs(0)), x * 2.0, 1e-6, 1e-6));  // undeclared: float32 out
  }
  req.set_fallback(v1::DENY);
  v1::InferResponse denied;
  grpc::Status s = Infer(req, &denied);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("float64"), std::string::npos) << s.error_message();
}

TEST_F(SimulatedDevicesTest, IntegerInputsAreNotCastOnMps) {
  at::Tensor ids = at::randint(0, 100, {3, 8}, at::TensorOptions().dtype(at::kLong));
  v1::InferRequest req = Request("embed", {{"ids", ids}});
  req.set_device("mps");
  v1::InferResponse resp = RunVerified(req);
  EXPECT_EQ(resp.placement().dtype(), v1::FLOAT16);
  EXPECT_EQ(resp.outputs(0).dtype(), v1::FLOAT32);
  // fp16 embeddings of the right rows: close to the fp32 reference.
  EXPECT_TRUE(at::allclose(FromWire(resp.outputs(0)), Reference("embed", {ids}), 1e-2, 1e-2));
}

TEST_F(SimulatedDevicesTest, AbsentDeviceFallsBackOrFailsWithDeny) {
  v1::InferRequest req = Request("mlp", {{"x", at::randn({1, 256})}});
  req.set_device("cuda:7");
  v1::InferResponse resp = Run(req);
  EXPECT_EQ(resp.placement().device(), "cpu");
  EXPECT_TRUE(resp.placement().fell_back());
  EXPECT_EQ(resp.placement().fallback_reason(), "device_unavailable:cuda:7");
  req.set_fallback(v1::DENY);
  Run(req, grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(SimulatedDevicesTest, Bf16OnCapability75GivesFp16AndSaysSo) {
  at::Tensor x = at::randn({2, 256});
  v1::InferRequest req = Request("mlp", {{"x", x}});
  req.set_device("cuda:0");
  req.set_precision(v1::BF16);
  v1::InferResponse resp = Run(req);
  EXPECT_EQ(resp.placement().device(), "cuda:0");
  EXPECT_EQ(resp.placement().dtype(), v1::FLOAT16);
  EXPECT_EQ(resp.outputs(0).dtype(), v1::FLOAT32);
  EXPECT_TRUE(at::allclose(FromWire(resp.outputs(0)), Reference("mlp", {x}), 5e-2, 5e-2));
  req.set_precision(v1::FP32);
  resp = Run(req);
  EXPECT_EQ(resp.placement().dtype(), v1::FLOAT32);
  EXPECT_TRUE(at::allclose(FromWire(resp.outputs(0)), Reference("mlp", {x}), 1e-5, 1e-5));
}

TEST_F(SimulatedDevicesTest, CpuHonoursExplicitHalfPrecisions) {
  at::Tensor x = at::randn({2, 256});
  for (auto [precision, dtype] : std::vector<std::pair<v1::Precision, v1::DataType>>{
           {v1::FP16, v1::FLOAT16}, {v1::BF16, v1::BFLOAT16}, {v1::AUTO, v1::FLOAT32}}) {
    v1::InferRequest req = Request("mlp", {{"x", x}});
    req.set_device("cpu");
    req.set_precision(precision);
    v1::InferResponse resp = RunVerified(req);
    EXPECT_EQ(resp.placement().dtype(), dtype);
    EXPECT_EQ(resp.placement().precision_reason(), "");
    EXPECT_TRUE(at::allclose(FromWire(resp.outputs(0)), Reference("mlp", {x}), 1e-1, 1e-1));
  }
}

TEST_F(SimulatedDevicesTest, UnsupportedMpsOpRunsOnCpuOnceLearnedAndDenyFails) {
  at::Tensor image = at::randn({1, 3, 64, 64});
  v1::InferRequest req = Request("cnn", {{"image", image}});
  req.set_device("mps");
  for (int i = 0; i < 2; ++i) {
    v1::InferResponse resp = Run(req);
    EXPECT_EQ(resp.placement().device(), "cpu");
    EXPECT_EQ(resp.placement().requested_device(), "mps");
    EXPECT_TRUE(resp.placement().fell_back());
    EXPECT_EQ(resp.placement().fallback_reason(), "unsupported_op:aten::max_pool2d");
    EXPECT_TRUE(at::allclose(FromWire(resp.outputs(0)), Reference("cnn", {image}), 1e-5, 1e-5));
  }
  // Only the first request touched MPS.
  std::string log = server_->Log();
  EXPECT_EQ(Occurrences(log, "retrying model 'cnn' on cpu"), 1u) << log;
  // ListDevices shows what was learned.
  grpc::ClientContext ctx;
  v1::ListDevicesResponse devices;
  ASSERT_TRUE(stub_->ListDevices(&ctx, v1::ListDevicesRequest(), &devices).ok());
  const v1::DeviceInfo* mps = nullptr;
  for (const auto& d : devices.devices()) {
    if (d.id() == "mps") mps = &d;
  }
  ASSERT_NE(mps, nullptr) << "simulated mps is missing from ListDevices";
  ASSERT_EQ(mps->unsupported_ops_size(), 1);
  EXPECT_EQ(mps->unsupported_ops(0), "cnn:aten::max_pool2d");
  // DENY now fails at once, naming the op; auto avoids MPS for this model.
  req.set_fallback(v1::DENY);
  v1::InferResponse denied;
  grpc::Status s = Infer(req, &denied);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("aten::max_pool2d"), std::string::npos) << s.error_message();
  req.set_fallback(v1::ALLOW);
  req.set_device("auto");
  EXPECT_NE(Run(req).placement().device(), "mps");
  // mlp uses no denied op and runs on mps.
  v1::InferRequest ok = Request("mlp", {{"x", at::randn({1, 256})}});
  ok.set_device("mps");
  EXPECT_EQ(Run(ok).placement().device(), "mps");
}

TEST_F(SimulatedDevicesTest, UnsupportedOpWithDenyFailsWithTheRealMessage) {
  v1::InferRequest req = Request("cnn", {{"image", at::randn({1, 3, 64, 64})}});
  req.set_device("mps");
  req.set_fallback(v1::DENY);
  v1::InferResponse resp;
  grpc::Status s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("The operator 'aten::max_pool2d' is not currently implemented for the MPS device"),
            std::string::npos)
      << s.error_message();
}

class ForceCpuTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override { return {"--simulate-devices=mps,cuda:0", "--devices=cpu"}; }
};

TEST_F(ForceCpuTest, AllowListHidesEveryOtherDevice) {
  grpc::ClientContext ctx;
  v1::ListDevicesResponse devices;
  ASSERT_TRUE(stub_->ListDevices(&ctx, v1::ListDevicesRequest(), &devices).ok());
  ASSERT_EQ(devices.devices_size(), 1);
  EXPECT_EQ(devices.devices(0).id(), "cpu");
  for (const char* dev : {"mps", "cuda:0", "", "auto"}) {
    v1::InferRequest req = Request("mlp", {{"x", at::randn({1, 256})}});
    req.set_device(dev);
    v1::InferResponse resp;
    ASSERT_TRUE(Infer(req, &resp).ok()) << dev;
    EXPECT_EQ(resp.placement().device(), "cpu") << dev;
  }
}

class TinyCudaTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override { return {"--simulate-devices=cuda:0=1MiB"}; }
};

TEST_F(TinyCudaTest, ModelLargerThanTheDeviceBudgetIsRefusedBeforeItLoads) {
  v1::InferRequest req = Request("mlp", {{"x", at::randn({1, 256})}});
  req.set_device("cuda:0");
  req.set_precision(v1::FP32);  // 1.6 MB of fp32 parameters
  req.set_fallback(v1::DENY);
  v1::InferResponse resp;
  grpc::Status s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  // Refused before loading, with the figures: its size from the model file,
  // and the budget (80% of the 1 MiB device).
  EXPECT_NE(s.error_message().find("can never be loaded there"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("-byte model file"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("budget of 819.20 KiB"), std::string::npos) << s.error_message();
  // A small model fits.
  v1::InferRequest small = Request("poly64", {{"x", at::randn({1, 4}, at::TensorOptions().dtype(at::kDouble))}});
  small.set_device("cuda:0");
  v1::InferResponse ok;
  ASSERT_TRUE(Infer(small, &ok).ok());
  EXPECT_EQ(ok.placement().device(), "cuda:0");
}

// A simulated GPU behind a slow link: a load pays the transfer a real one
// would (here 300 ms plus the bytes at 100 MB/s), the request that caused it
// waits for it and is counted so, and the move is logged and measured.
class SlowLinkCudaTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override {
    return {"--simulate-devices=cuda:0,bandwidth=100MB/s,transfer_latency=300ms", "--metrics-address=127.0.0.1:0"};
  }
};

TEST_F(SlowLinkCudaTest, ALoadPaysTheTransferAndTheRequestThatWaitedIsCounted) {
  // The models that warm up at start-up loaded on cuda:0 (auto's first
  // choice) already: what poly64 adds is measured against this.
  const std::string before = ScrapeMetrics(*server_);
  auto added = [&](const std::string& series) { return AddedSince(before, *server_, series); };
  v1::InferRequest req = Request("poly64", {{"x", at::randn({1, 4}, at::TensorOptions().dtype(at::kDouble))}});
  req.set_device("cuda:0");
  req.set_fallback(v1::DENY);
  v1::InferResponse resp;
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(Infer(req, &resp).ok());
  const auto first = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(resp.placement().device(), "cuda:0");
  EXPECT_GE(first, std::chrono::milliseconds(300)) << "the first request did not wait for the transfer";
  start = std::chrono::steady_clock::now();
  ASSERT_TRUE(Infer(req, &resp).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, first) << "the second request paid a transfer too";

  const std::string log = server_->Log();
  const size_t line = log.find("loaded poly64");
  ASSERT_NE(line, std::string::npos) << log;
  const size_t moved = log.find("moved to the device in ", line);
  ASSERT_NE(moved, std::string::npos) << log.substr(line, 300);
  EXPECT_GE(std::atoi(log.c_str() + moved + 23), 300) << log.substr(line, 300);

  EXPECT_GE(added("infergate_model_transfer_seconds_total{device=\"cuda:0\"}"), 0.3);
  // poly64's parameters: 3x4 + 3x4 + 3 doubles.
  EXPECT_EQ(added("infergate_model_transfer_bytes_total{device=\"cuda:0\"}"), 27 * 8);
  EXPECT_EQ(added("infergate_requests_waited_for_load_total{device=\"cuda:0\"}"), 1);
}

// auto and a model resident only on the CPU, where it is slow: its
// requests run on the CPU while it moves to the simulated GPU in the
// background (a 1.5 s transfer), then run on the GPU. A request that
// arrives near the move's end may wait for it where that is faster than
// the CPU (the no-cold-start rule: the fastest path ready when it arrived;
// ready_path "load_and_run"); no other request waits.
class BackgroundMoveTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override {
    return {"--simulate-devices=cuda:0,transfer_latency=1500ms", "--metrics-address=127.0.0.1:0"};
  }
};

TEST_F(BackgroundMoveTest, AutoRunsWhereTheModelIsReadyWhileItMovesToTheFasterDevice) {
  const std::string before = ScrapeMetrics(*server_);
  auto added = [&](const std::string& series) { return AddedSince(before, *server_, series); };
  v1::InferRequest on_cpu = Request("slow", {{"x", at::ones({4})}});
  on_cpu.set_device("cpu");
  v1::InferResponse resp;
  ASSERT_TRUE(Infer(on_cpu, &resp, 600000).ok());  // resident on the CPU, its time there measured
  v1::InferRequest automatic = Request("slow", {{"x", at::ones({4})}});
  ASSERT_TRUE(Infer(automatic, &resp, 600000).ok());
  EXPECT_EQ(resp.placement().device(), "cpu") << "auto waited for a load instead of using the ready copy";
  EXPECT_EQ(resp.placement().ready_path(), "resident");
  // The GPU copy arrives after the transfer; until then auto keeps to the
  // CPU, but for a request that found waiting for the move faster.
  bool on_gpu = false;
  int chose_the_move = 0;
  for (int i = 0; i < 60 && !on_gpu; ++i) {
    ASSERT_TRUE(Infer(automatic, &resp, 600000).ok());
    on_gpu = resp.placement().device() == "cuda:0";
    if (resp.placement().ready_path() == "load_and_run") {
      ++chose_the_move;
      EXPECT_EQ(resp.placement().device(), "cuda:0");
    } else if (!on_gpu) {
      EXPECT_EQ(resp.placement().ready_path(), "resident") << "request " << i;
    }
  }
  EXPECT_TRUE(on_gpu) << "the model never moved to cuda:0\n" << server_->Log();
  // The copy got there by the background move, or by a request that chose
  // to load and run (it waited for that load, counted below). A promotion
  // is counted once its warm-up has run; the copy that answered may be one
  // that shared cuda:0's link with it and got there first (the accuracy
  // check's), so it is awaited, not assumed, unless a request loaded it.
  const std::string promoted = "infergate_model_moves_total{device=\"cuda:0\",model=\"slow\",reason=\"promoted\"}";
  if (chose_the_move == 0) {
    for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
         added(promoted) < 1 && std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    }
    EXPECT_EQ(added(promoted), 1) << server_->Log();
    EXPECT_NE(server_->Log().find("model 'slow' version 1 moved to cuda:0 in the background"), std::string::npos);
  } else {
    EXPECT_LE(added(promoted), 1) << server_->Log();
  }
  EXPECT_LE(added("infergate_requests_waited_for_load_total{device=\"cuda:0\"}"), chose_the_move)
      << "a request waited for the move although the CPU's copy was the faster path";
}

// auto's estimate of when a request would start (start_estimate.h),
// through the real server: while a heavy model's run holds cuda:0's worker,
// a light model's request starts at once on the fair-share thread, so auto
// sends it to cuda:0, four times as fast for it as its ready CPU copy, instead
// of counting the heavy run ahead of it (which takes longer than the light
// model's CPU run: counted ahead, it sent the request to the CPU). cuda:0
// takes 100x a run's host CPU time (compute_scale), the CPU 400x, and every
// request asks for FP32: on its own dtype (BF16 on cuda:0) the simulated
// device ran the mlp's BF16 matmuls on the host at about four times the
// CPU time of the CPU copy's FP32 ones under ASan, cuda:0 came out no
// faster than the CPU for it, and auto rightly sent it to the CPU (5 of 6
// runs beside three CPU hogs).
class StartEstimateTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override {
    return {"--simulate-devices=cuda:0,compute_scale=100", "--simulate-cpu-slowdown=400", "--precision-checks=false"};
  }
};

TEST_F(StartEstimateTest, ALightModelsRequestStartsBesideAHeavyModelsRunOnTheFairShareThread) {
  v1::InferResponse resp;
  // The light model resident on both devices, its latency measured on each
  // (a latency is learned from a copy's second run on).
  for (const char* device : {"cpu", "cuda:0"}) {
    v1::InferRequest req = Request("mlp", {{"x", at::randn({1, 256})}});
    req.set_device(device);
    req.set_precision(v1::FP32);
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(Infer(req, &resp, 120000).ok());
      ASSERT_EQ(resp.placement().device(), device);
    }
  }
  v1::InferRequest heavy = Request("cnn", {{"image", at::randn({1, 3, 64, 64})}});
  heavy.set_device("cuda:0");
  heavy.set_precision(v1::FP32);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(Infer(heavy, &resp, 120000).ok());
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(Infer(heavy, &resp, 120000).ok());
  const auto heavy_takes = std::chrono::steady_clock::now() - start;
  // The heavy run under way, the light request arrives a quarter into it.
  grpc::Status heavy_status;
  std::chrono::steady_clock::time_point heavy_done;
  start = std::chrono::steady_clock::now();
  std::thread heavy_caller([&] {
    v1::InferResponse heavy_resp;
    heavy_status = Infer(heavy, &heavy_resp, 120000);
    heavy_done = std::chrono::steady_clock::now();
  });
  std::this_thread::sleep_until(start + heavy_takes / 4);
  v1::InferRequest light = Request("mlp", {{"x", at::randn({1, 256})}});
  light.set_precision(v1::FP32);
  const grpc::Status light_status = Infer(light, &resp, 120000);
  const auto light_done = std::chrono::steady_clock::now();
  heavy_caller.join();
  ASSERT_TRUE(heavy_status.ok()) << heavy_status.error_message();
  ASSERT_TRUE(light_status.ok()) << light_status.error_message();
  EXPECT_EQ(resp.placement().device(), "cuda:0")
      << "auto counted the heavy model's run ahead of a request the fair-share thread starts at once\n"
      << resp.placement().DebugString();
  EXPECT_EQ(resp.placement().ready_path(), "ideal");
  EXPECT_LT(light_done, heavy_done) << "the light request waited for the heavy run";
}

// Learned device limits survive a restart through the state file.
TEST(StateFile, RestartRemembersWhatMpsCannotRun) {
  std::string state = DemoRepository() + "/../ig_state_" + std::to_string(::getpid());
  std::filesystem::remove(state);
  std::vector<std::string> args = {"--model-repository=" + DemoRepository(), "--simulate-devices=mps",
                                   "--simulate-mps-unsupported-ops=aten::max_pool2d", "--state-file=" + state};
  v1::InferRequest req;
  req.set_model("cnn");
  req.set_device("mps");
  *req.add_inputs() = ToWire(at::randn({1, 3, 64, 64}), "image");
  for (int run = 0; run < 2; ++run) {
    auto server = ServerProcess::Start(args);
    ASSERT_NE(server, nullptr);
    {
      auto stub =
          v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
      grpc::ClientContext ctx;
      v1::InferResponse resp;
      ASSERT_TRUE(stub->Infer(&ctx, req, &resp).ok());
      EXPECT_EQ(resp.placement().device(), "cpu");
      EXPECT_EQ(resp.placement().fallback_reason(), "unsupported_op:aten::max_pool2d");
    }
    bool retried = server->Log().find("retrying model 'cnn' on cpu") != std::string::npos;
    // The first run learns by failing on MPS once; after the restart the
    // very first request goes straight to the CPU.
    EXPECT_EQ(retried, run == 0) << server->Log();
    EXPECT_EQ(server->Stop(), 0);
  }
  std::filesystem::remove(state);
}

class SmallCudaBudgetTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override {
    return {"--simulate-devices=cuda:0", "--cache-budget=cuda:0=1.8MiB"};
  }
};

TEST_F(SmallCudaBudgetTest, EvictsTheOlderOfTwoModels) {
  for (const char* model : {"cnn", "mlp"}) {
    v1::InferRequest req = std::string(model) == "cnn" ? Request("cnn", {{"image", at::randn({1, 3, 64, 64})}})
                                                       : Request("mlp", {{"x", at::randn({1, 256})}});
    req.set_device("cuda:0");
    req.set_precision(v1::FP32);  // cnn 0.35 MB + mlp 1.6 MB > 1.8 MiB
    v1::InferResponse resp;
    ASSERT_TRUE(Infer(req, &resp).ok()) << model;
    EXPECT_EQ(resp.placement().device(), "cuda:0");
  }
  grpc::ClientContext ctx;
  v1::ListDevicesResponse devices;
  ASSERT_TRUE(stub_->ListDevices(&ctx, v1::ListDevicesRequest(), &devices).ok());
  for (const auto& d : devices.devices()) {
    if (d.id() != "cuda:0") continue;
    std::vector<std::string> resident(d.resident_models().begin(), d.resident_models().end());
    EXPECT_NE(std::find(resident.begin(), resident.end(), "mlp:1:FLOAT32"), resident.end());
    EXPECT_EQ(std::find(resident.begin(), resident.end(), "cnn:1:FLOAT32"), resident.end());
  }
  EXPECT_NE(server_->Log().find("evicted cnn:1@cuda:0/FLOAT32"), std::string::npos);
}

TEST_F(TinyCudaTest, OutOfMemoryFallsBackToTheCpuWhenAllowed) {
  at::Tensor x = at::randn({1, 256});
  v1::InferRequest req = Request("mlp", {{"x", x}});
  req.set_device("cuda:0");
  req.set_precision(v1::FP32);
  v1::InferResponse resp;
  ASSERT_TRUE(Infer(req, &resp).ok());
  EXPECT_EQ(resp.placement().device(), "cpu");
  EXPECT_TRUE(resp.placement().fell_back());
  EXPECT_EQ(resp.placement().fallback_reason(), "oom");
  EXPECT_TRUE(at::allclose(FromWire(resp.outputs(0)), Reference("mlp", {x}), 1e-5, 1e-5));
}

// Simulated memory smaller than the cache budget: the second model only
// fits once the idle first one is evicted, which the out-of-memory retry does.
class OomRetryTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override {
    return {"--simulate-devices=cuda:0=1.8MiB", "--cache-budget=cuda:0=100MiB"};
  }
};

TEST_F(OomRetryTest, EvictsIdleModelsAndRetriesOnce) {
  for (const char* model : {"cnn", "mlp"}) {
    v1::InferRequest req = std::string(model) == "cnn" ? Request("cnn", {{"image", at::randn({1, 3, 64, 64})}})
                                                       : Request("mlp", {{"x", at::randn({1, 256})}});
    req.set_device("cuda:0");
    req.set_precision(v1::FP32);
    req.set_fallback(v1::DENY);
    v1::InferResponse resp;
    grpc::Status s = Infer(req, &resp);
    ASSERT_TRUE(s.ok()) << model << ": " << s.error_message();
    EXPECT_EQ(resp.placement().device(), "cuda:0");
  }
  std::string log = server_->Log();
  EXPECT_NE(log.find("evicted cnn:1@cuda:0/FLOAT32"), std::string::npos) << log;
  // Each request retried exactly once after its out-of-memory error (cnn's
  // run, with warm-up's copies resident; mlp's load), and the retry succeeded.
  for (const std::string model : {"cnn", "mlp"}) {
    size_t retries = 0;
    for (size_t at = log.find("out of memory while "); at != std::string::npos;
         at = log.find("out of memory while ", at + 1)) {
      size_t end = log.find('\n', at);
      std::string line = log.substr(at, end - at);
      if (line.find(" " + model + ":1@cuda:0/FLOAT32; evicting idle models and retrying once") != std::string::npos) {
        ++retries;
      }
    }
    EXPECT_EQ(retries, 1u) << model << "\n" << log;
  }
}

// Throw-away certificates made with openssl at run time: a CA, a server
// certificate for 127.0.0.1, a client certificate from the same CA and one
// from a stranger CA.

}  // namespace
}  // namespace infergate::testing

namespace infergate::testing {
namespace {

// A model pinned to cuda:1 by its config runs there under `auto` every
// time, although cuda:0 comes first on a cold start and is idle; asked for
// cuda:0 it is refused, and a model that lists the cpu too falls back there
// with the reason (refused with DENY).
TEST(Pinning, AModelPinnedToCuda1RunsThereAndNowhereElse) {
  namespace fs = std::filesystem;
  ScratchDir scratch("ig_pinning_");
  ASSERT_FALSE(scratch.path().empty());
  const fs::path repo = scratch.path();
  // "pinned" may run on cuda:1 only; "pinned_or_cpu" may also fall back to the cpu.
  for (const auto& [name, devices] :
       {std::pair<std::string, std::string>{"pinned", "\"cuda:1\""}, {"pinned_or_cpu", "\"cuda:1\", \"cpu\""}}) {
    fs::create_directories(repo / name / "1");
    fs::copy_file(DemoRepository() + "/mlp/1/model.pt", repo / name / "1" / "model.pt");
    std::ofstream(repo / name / "config.pbtxt")
        << "max_batch_size: 64\ninputs { name: \"x\" dtype: FLOAT32 dims: [256] }\ndevices: [" << devices << "]\n";
  }
  auto server = ServerProcess::Start({"--model-repository=" + repo.string(), "--simulate-devices=cuda:0,cuda:1"});
  ASSERT_NE(server, nullptr);
  auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  auto infer = [&](const std::string& device, v1::FallbackPolicy fallback, v1::InferResponse* resp,
                   const std::string& model = "pinned") {
    v1::InferRequest req;
    req.set_model(model);
    req.set_device(device);
    req.set_fallback(fallback);
    *req.add_inputs() = ToWire(at::randn({1, 256}), "x");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub->Infer(&ctx, req, resp);
  };
  v1::InferResponse resp;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(infer("auto", v1::ALLOW, &resp).ok());
    EXPECT_EQ(resp.placement().device(), "cuda:1");
    EXPECT_FALSE(resp.placement().fell_back());
  }
  // Asked for cuda:0: not allowed there, and not on the cpu either.
  grpc::Status refused = infer("cuda:0", v1::ALLOW, &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error_message().find("may not run on the cpu"), std::string::npos) << refused.error_message();
  ASSERT_TRUE(infer("cuda:1", v1::DENY, &resp).ok());
  EXPECT_EQ(resp.placement().device(), "cuda:1");
  // With the cpu listed, a request for cuda:0 falls back there (or fails with DENY).
  ASSERT_TRUE(infer("cuda:0", v1::ALLOW, &resp, "pinned_or_cpu").ok());
  EXPECT_EQ(resp.placement().device(), "cpu");
  EXPECT_EQ(resp.placement().fallback_reason(), "device_not_allowed:cuda:0");
  grpc::Status denied = infer("cuda:0", v1::DENY, &resp, "pinned_or_cpu");
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(denied.error_message().find("cuda:0"), std::string::npos) << denied.error_message();
  // Neither was ever loaded on cuda:0.
  grpc::ClientContext ctx;
  v1::ListModelsResponse models;
  ASSERT_TRUE(stub->ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
  ASSERT_EQ(models.models_size(), 2);
  for (const auto& model : models.models()) {
    for (const auto& loaded : model.loaded()) EXPECT_NE(loaded.device(), "cuda:0") << model.name();
  }
  server.reset();
}

// --accelerator-workers: with two workers on the (simulated) cuda:0, two of
// one model's batches run there at once; with one (the default), never
// more than one; with one, and the model's own instance count set to 2 by
// a Triton-style load (instance_group count), two again. A light model's
// request is still answered while both workers are busy (fair queueing's
// spare worker), and Open Inference's ModelConfig gives the GPU instance
// group that count. Its `slow` does 16 matrix products a call (the demo's
// does 64): a quarter second or more is all the sampling needs.
TEST(AcceleratorWorkers, BatchesOfOneModelOverlapOnTheDeviceWithTwoWorkers) {
  namespace fs = std::filesystem;
  ScratchDir scratch("ig_workers_");
  ASSERT_FALSE(scratch.path().empty());
  const fs::path repo = scratch.path();
  fs::copy(DemoRepository() + "/mlp", repo / "mlp", fs::copy_options::recursive);
  WriteMatrixProductModel(repo / "slow", 16, "");
  struct Case {
    int workers;
    const char* instances_config;  // a load's Triton config for "slow"; null: none
    int overlap;                   // the slow model's batches at once
  };
  for (const Case& c : {Case{2, nullptr, 2}, Case{1, nullptr, 1},
                        Case{1, R"({"instance_group": [{"kind": "KIND_GPU", "count": 2}]})", 2}}) {
    SCOPED_TRACE(::testing::Message() << "--accelerator-workers=" << c.workers << " config "
                                      << (c.instances_config ? c.instances_config : "(none)"));
    auto server = ServerProcess::Start({"--model-repository=" + repo.string(), "--simulate-devices=cuda:0=8GiB",
                                        "--accelerator-workers=" + std::to_string(c.workers)});
    ASSERT_NE(server, nullptr);
    auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
    auto stub = v1::InferenceService::NewStub(channel);
    if (c.instances_config) {
      auto v2 = inference::GRPCInferenceService::NewStub(channel);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      inference::RepositoryModelLoadRequest load;
      load.set_model_name("slow");
      (*load.mutable_parameters())["config"].set_string_param(c.instances_config);
      inference::RepositoryModelLoadResponse loaded;
      grpc::Status s = v2->RepositoryModelLoad(&ctx, load, &loaded);
      ASSERT_TRUE(s.ok()) << s.error_message();
    }
    auto slow_on_cuda = [&] {
      v1::InferRequest req;
      req.set_model("slow");  // no batching: each request is a batch of its own
      req.set_device("cuda:0");
      req.set_fallback(v1::DENY);
      *req.add_inputs() = ToWire(at::ones({4}), "x");
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      v1::InferResponse resp;
      return stub->Infer(&ctx, req, &resp);
    };
    ASSERT_TRUE(slow_on_cuda().ok());  // loaded, so the timed part is the runs alone
    std::atomic<int> ok{0};
    std::atomic<bool> done{false};
    std::vector<std::thread> callers;
    constexpr int kCalls = 4;
    for (int i = 0; i < kCalls; ++i) callers.emplace_back([&] { ok += slow_on_cuda().ok(); });
    // Sample cuda:0 until every call is answered: the most of the slow
    // model's batches seen running there at once. The device's in-flight
    // count also holds the light model's request (and its load) while that
    // is out, so a sample counts only if no light call was out at any time
    // during it: `light_epoch` is odd while one is, and moves at both ends.
    int most_running = 0;
    bool light_answered = false;
    std::atomic<int> light_epoch{0};
    std::thread sampler([&] {
      while (!done.load()) {
        const int epoch_before = light_epoch.load();
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        v1::ListDevicesResponse devices;
        const bool listed = stub->ListDevices(&ctx, v1::ListDevicesRequest(), &devices).ok();
        if (listed && epoch_before % 2 == 0 && light_epoch.load() == epoch_before) {
          for (const auto& d : devices.devices()) {
            if (d.id() == "cuda:0") most_running = std::max(most_running, static_cast<int>(d.in_flight()));
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    if (c.overlap == 2) {
      ASSERT_TRUE(WaitForDevice(*stub, [](const v1::DeviceInfo& d) {
        return d.id() == "cuda:0" && d.in_flight() >= 2;
      })) << "two slow batches never ran on cuda:0 at once";
      v1::InferRequest light;
      light.set_model("mlp");
      light.set_device("cuda:0");
      light.set_fallback(v1::DENY);
      *light.add_inputs() = ToWire(at::randn({1, 256}), "x");
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      v1::InferResponse resp;
      light_epoch++;
      light_answered = stub->Infer(&ctx, light, &resp).ok();
      light_epoch++;
    }
    for (auto& t : callers) t.join();
    done = true;
    sampler.join();
    EXPECT_EQ(ok.load(), kCalls);
    if (c.overlap == 2) {
      EXPECT_EQ(most_running, 2);
      EXPECT_TRUE(light_answered) << "the light model waited out both slow workers' batches";
      auto v2 = inference::GRPCInferenceService::NewStub(channel);
      grpc::ClientContext ctx;
      inference::ModelConfigRequest req;
      req.set_name(c.instances_config ? "slow" : "mlp");
      inference::ModelConfigResponse config;
      ASSERT_TRUE(v2->ModelConfig(&ctx, req, &config).ok());
      bool gpu_group = false;
      for (const auto& group : config.config().instance_group()) {
        if (group.kind() == inference::ModelInstanceGroup::KIND_GPU) gpu_group = group.count() == 2;
      }
      EXPECT_TRUE(gpu_group) << config.config().DebugString();
    } else {
      EXPECT_EQ(most_running, 1) << "one worker ran two of one model's batches at once";
    }
    EXPECT_EQ(server->Stop(), 0);
  }
}

}  // namespace
}  // namespace infergate::testing
