// The public API end to end: health, reflection, devices, models, placement, the CLI.

#include "tests/common/build_paths.h"
#include "tests/integration/server_fixture.h"

namespace infergate::testing {
namespace {

TEST_F(ServerTest, HealthIsServing) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  for (const char* service : {"", "infergate.v1.InferenceService"}) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    ASSERT_TRUE(health->Check(&ctx, req, &resp).ok()) << service;
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING) << service;
  }
}

TEST_F(ServerTest, ReflectionListsAndDescribesTheService) {
  auto reflection = grpc::reflection::v1alpha::ServerReflection::NewStub(channel_);
  grpc::ClientContext ctx;
  auto stream = reflection->ServerReflectionInfo(&ctx);
  grpc::reflection::v1alpha::ServerReflectionRequest req;
  req.set_list_services("");
  ASSERT_TRUE(stream->Write(req));
  grpc::reflection::v1alpha::ServerReflectionResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  std::vector<std::string> names;
  for (const auto& s : resp.list_services_response().service()) names.push_back(s.name());
  EXPECT_NE(std::find(names.begin(), names.end(), "infergate.v1.InferenceService"), names.end());

  req.set_file_containing_symbol("infergate.v1.InferenceService");
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_GE(resp.file_descriptor_response().file_descriptor_proto_size(), 1);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServerTest, ListDevicesReportsTheCpuWithRealFigures) {
  grpc::ClientContext ctx;
  v1::ListDevicesResponse resp;
  ASSERT_TRUE(stub_->ListDevices(&ctx, v1::ListDevicesRequest(), &resp).ok());
  const v1::DeviceInfo* cpu = nullptr;
  for (const auto& d : resp.devices()) {
    if (d.id() == "cpu") {
      cpu = &d;
    } else {
      EXPECT_TRUE(d.kind() == v1::CUDA || d.kind() == v1::MPS) << d.id();
    }
    EXPECT_FALSE(d.simulated()) << "simulated devices appear only when asked for";
  }
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->kind(), v1::CPU);
  EXPECT_TRUE(cpu->available());
  EXPECT_FALSE(cpu->name().empty());
  EXPECT_EQ(cpu->logical_cores(), std::thread::hardware_concurrency());
  EXPECT_GT(cpu->memory_total_bytes(), 0u);
  EXPECT_GT(cpu->memory_used_bytes(), 0u);
  EXPECT_LT(cpu->memory_used_bytes(), cpu->memory_total_bytes());
  EXPECT_EQ(cpu->default_precision(), v1::FP32);
  EXPECT_EQ(cpu->supported_dtypes_size(), 10);  // every DType, INT16 included
  // mlp and cnn ask for warm-up, so they are resident from the start.
  std::vector<std::string> resident(cpu->resident_models().begin(), cpu->resident_models().end());
  EXPECT_NE(std::find(resident.begin(), resident.end(), "mlp:1:FLOAT32"), resident.end());
}

TEST_F(ServerTest, EveryDemoModelAgreesWithInProcessForward) {
  ExpectAgreement("mlp", {{"x", at::randn({1, 256})}}, v1::FLOAT32);
  ExpectAgreement("mlp", {{"x", at::randn({5, 256})}}, v1::FLOAT32);
  ExpectAgreement("cnn", {{"image", at::randn({2, 3, 64, 64})}}, v1::FLOAT32);
  ExpectAgreement("poly64", {{"x", at::randn({3, 4}, at::TensorOptions().dtype(at::kDouble))}}, v1::FLOAT64);
  ExpectAgreement("embed", {{"ids", at::randint(0, 100, {4, 8}, at::TensorOptions().dtype(at::kLong))}}, v1::FLOAT32);
}

TEST_F(ServerTest, Float64ModelRunsInFloat64AndIntegerInputsAreNotCast) {
  v1::InferResponse resp;
  at::Tensor x64 = at::randn({1, 4}, at::TensorOptions().dtype(at::kDouble));
  ASSERT_TRUE(Infer(Request("poly64", {{"x", x64}}), &resp).ok());
  EXPECT_EQ(resp.placement().dtype(), v1::FLOAT64);
  EXPECT_EQ(resp.outputs(0).dtype(), v1::FLOAT64);
  // Computed in float64: equal to the reference, not merely close.
  EXPECT_TRUE(at::equal(FromWire(resp.outputs(0)), Reference("poly64", {x64})));
  ASSERT_TRUE(Infer(Request("mlp", {{"x", at::randn({1, 256})}}), &resp).ok());
  EXPECT_EQ(resp.placement().dtype(), v1::FLOAT32);
  // INT64 token ids reach the model as INT64 (an embedding lookup fails on
  // anything else), and its answer is the reference's.
  at::Tensor ids = at::randint(0, 100, {2, 8}, at::TensorOptions().dtype(at::kLong));
  ASSERT_TRUE(Infer(Request("embed", {{"ids", ids}}), &resp).ok());
  EXPECT_TRUE(at::allclose(FromWire(resp.outputs(0)), Reference("embed", {ids}), 1e-6, 1e-6));
  at::Tensor float_ids = ids.to(at::kFloat);
  grpc::Status wrong = Infer(Request("embed", {{"ids", float_ids}}), &resp);
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "float ids must not be cast to INT64";
}

TEST_F(ServerTest, PlacementAndTimingAreFilledIn) {
  v1::InferRequest req = Request("mlp", {{"x", at::randn({3, 256})}});
  req.set_request_id("req-42");
  req.set_device("cpu");
  v1::InferResponse resp;
  ASSERT_TRUE(Infer(req, &resp).ok());
  EXPECT_EQ(resp.request_id(), "req-42");
  EXPECT_EQ(resp.placement().device(), "cpu");
  EXPECT_EQ(resp.placement().requested_device(), "cpu");
  EXPECT_EQ(resp.placement().batch_size(), 3u);
  EXPECT_EQ(resp.placement().model_version(), 1);
  EXPECT_EQ(resp.outputs(0).name(), "logits");
  EXPECT_EQ(resp.outputs(0).shape(0), 3);
  EXPECT_EQ(resp.outputs(0).shape(1), 10);
  // Timing: the model ran for some time, and the whole is at least its parts.
  EXPECT_GT(resp.timing().compute_us(), 0u);
  EXPECT_GE(resp.timing().total_us(), resp.timing().compute_us() + resp.timing().queue_us());
  EXPECT_LT(resp.timing().total_us(), 30u * 1000 * 1000);
}

TEST_F(ServerTest, AbsentDeviceFallsBackUnlessDenied) {
  v1::InferRequest req = Request("mlp", {{"x", at::randn({1, 256})}});
  req.set_device("cuda:7");
  v1::InferResponse resp;
  ASSERT_TRUE(Infer(req, &resp).ok());
  EXPECT_EQ(resp.placement().device(), "cpu");
  EXPECT_EQ(resp.placement().requested_device(), "cuda:7");
  EXPECT_TRUE(resp.placement().fell_back());
  EXPECT_EQ(resp.placement().fallback_reason(), "device_unavailable:cuda:7");
  req.set_fallback(v1::DENY);
  grpc::Status s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("cuda:7"), std::string::npos);
}

TEST_F(ServerTest, VersionsAreSelectable) {
  at::Tensor x = at::ones({1, 2});
  for (auto [version, factor] : std::vector<std::pair<std::string, float>>{{"1", 3.0f}, {"2", 5.0f}, {"", 5.0f}}) {
    v1::InferRequest req = Request("versioned", {{"x", x}});
    req.set_version(version);
    v1::InferResponse resp;
    ASSERT_TRUE(Infer(req, &resp).ok()) << version;
    EXPECT_FLOAT_EQ(FromWire(resp.outputs(0))[0][0].item<float>(), factor) << version;
    EXPECT_EQ(resp.placement().model_version(), version.empty() ? 2 : std::stoi(version));
  }
}

TEST_F(ServerTest, DictOutputsKeepNamesAndIntegerDtypes) {
  v1::InferResponse resp;
  ASSERT_TRUE(Infer(Request("pair", {{"a", at::randn({2, 3})}, {"b", at::randn({2, 3})}}), &resp).ok());
  ASSERT_EQ(resp.outputs_size(), 2);
  std::map<std::string, v1::DataType> got;
  for (const auto& o : resp.outputs()) got[o.name()] = o.dtype();
  EXPECT_EQ(got["sum"], v1::FLOAT32);
  EXPECT_EQ(got["argmax"], v1::INT64);
}

TEST_F(ServerTest, ConcurrentClientsEachGetTheirOwnAnswer) {
  constexpr int kThreads = 8, kPerThread = 25;
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> expected;
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    inputs.push_back(at::randn({1 + i % 4, 256}));
    expected.push_back(Reference("mlp", {inputs.back()}));
  }
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto stub = v1::InferenceService::NewStub(channel_);
      for (int i = t * kPerThread; i < (t + 1) * kPerThread; ++i) {
        v1::InferRequest req = Request("mlp", {{"x", inputs[i]}});
        v1::InferResponse resp;
        grpc::ClientContext ctx;
        if (!stub->Infer(&ctx, req, &resp).ok()) {
          failed++;
          continue;
        }
        if (!at::allclose(FromWire(resp.outputs(0)), expected[i], 1e-5, 1e-5)) wrong++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(ServerTest, ListModelsLoadAndUnload) {
  grpc::ClientContext ctx;
  v1::ListModelsResponse models;
  ASSERT_TRUE(stub_->ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
  std::map<std::string, const v1::ModelInfo*> by_name;
  for (const auto& m : models.models()) by_name[m.name()] = &m;
  for (const char* name : {"mlp", "cnn", "poly64", "embed", "versioned"}) ASSERT_TRUE(by_name.count(name)) << name;
  EXPECT_EQ(by_name["versioned"]->versions_size(), 2);
  EXPECT_EQ(by_name["mlp"]->config().max_batch_size(), 64u);

  v1::LoadModelRequest load;
  load.set_model("versioned");
  load.set_version("1");
  load.set_device("cpu");
  v1::LoadModelResponse loaded;
  grpc::ClientContext lctx;
  ASSERT_TRUE(stub_->LoadModel(&lctx, load, &loaded).ok());
  EXPECT_EQ(loaded.loaded().device(), "cpu");
  EXPECT_EQ(loaded.loaded().version(), 1);

  auto resident = [&] {
    grpc::ClientContext dctx;
    v1::ListDevicesResponse devices;
    EXPECT_TRUE(stub_->ListDevices(&dctx, v1::ListDevicesRequest(), &devices).ok());
    std::vector<std::string> out;
    for (const auto& d : devices.devices())
      out.insert(out.end(), d.resident_models().begin(), d.resident_models().end());
    return out;
  };
  auto r = resident();
  EXPECT_NE(std::find(r.begin(), r.end(), "versioned:1:FLOAT32"), r.end());

  v1::UnloadModelRequest unload;
  unload.set_model("versioned");
  v1::UnloadModelResponse unloaded;
  grpc::ClientContext uctx;
  ASSERT_TRUE(stub_->UnloadModel(&uctx, unload, &unloaded).ok());
  EXPECT_EQ(unloaded.unloaded(), 1u);
  r = resident();
  EXPECT_EQ(std::find(r.begin(), r.end(), "versioned:1:FLOAT32"), r.end());

  v1::LoadModelRequest bad = load;
  bad.set_model("corrupt");
  bad.clear_version();
  grpc::ClientContext bctx;
  EXPECT_EQ(stub_->LoadModel(&bctx, bad, &loaded).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  bad.set_model("../x");
  grpc::ClientContext b2ctx;
  EXPECT_EQ(stub_->LoadModel(&b2ctx, bad, &loaded).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServerTest, CliTalksToTheServer) {
  std::string out;
  int rc = RunCommand({InfergateCliBinary(), "--address", server_->address(), "infer", "--model", "mlp"}, &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("output logits FLOAT32 [1,10]"), std::string::npos) << out;
  EXPECT_NE(out.find("placement: device=cpu"), std::string::npos) << out;
  out.clear();
  rc = RunCommand({InfergateCliBinary(), "--address", server_->address(), "devices"}, &out);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out.rfind("cpu\t", 0), 0u) << out;
  out.clear();
  rc = RunCommand(
      {InfergateCliBinary(), "--address", server_->address(), "infer", "--model", "embed", "--input", "ids=2x8:random"},
      &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("output embedding FLOAT32 [2,16]"), std::string::npos) << out;
}

// Devices and precision, on simulated CUDA (compute capability 7.5) and MPS.

}  // namespace
}  // namespace infergate::testing
