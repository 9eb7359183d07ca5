// Clients that cancel while their requests wait in a queue: the server keeps
// answering everyone else, returns the requests' budget and exits cleanly.

#include <random>

#include "inference/grpc_service.grpc.pb.h"
#include "tests/integration/server_fixture.h"

namespace infergate::testing {
namespace {

v1::InferRequest SlowV1Request() {
  v1::InferRequest req;
  req.set_model("slow");
  *req.add_inputs() = ToWire(at::ones({4}), "x");
  return req;
}

// A large typed (not raw) request for `slow`: decoding it copies every value,
// which widens the moment between the server reading it and queueing it.
inference::ModelInferRequest LargeTypedSlowRequest(int64_t elements) {
  inference::ModelInferRequest req;
  req.set_model_name("slow");
  auto* in = req.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(elements);
  auto* values = in->mutable_contents()->mutable_fp32_contents();
  values->Reserve(static_cast<int>(elements));
  for (int64_t i = 0; i < elements; ++i) values->Add(1.0f);
  return req;
}

// The reliability probe's shape: two clients keep `slow` busy on one CPU
// worker while 40 streams each send a large request and cancel it 0-80 ms
// later. Cancelling a stream whose request was being queued used to answer
// that request inside the stream's own lock, wedging gRPC's threads: health
// timed out, the budget was never returned and SIGTERM never finished.
TEST(Cancellation, StreamsCancelledWhileTheirRequestsQueueLeaveTheServerServing) {
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--devices=cpu", "--cpu-workers=1",
                                      "--drain-timeout=30s", "--max-inflight-bytes=1GiB"});
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  auto v1_stub = v1::InferenceService::NewStub(channel);
  auto v2_stub = inference::GRPCInferenceService::NewStub(channel);

  std::atomic<bool> stop_busy{false};
  std::vector<std::thread> busy;
  for (int i = 0; i < 2; ++i) {
    busy.emplace_back([&] {
      while (!stop_busy.load()) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
        v1::InferResponse resp;
        v1_stub->Infer(&ctx, SlowV1Request(), &resp);
      }
    });
  }
  ASSERT_TRUE(WaitForDevice(*v1_stub, [](const v1::DeviceInfo& d) { return d.in_flight() > 0; }))
      << "the busy clients never got the worker";

  const inference::ModelInferRequest large = LargeTypedSlowRequest(1 << 20);  // 4 MiB of FP32, typed
  std::vector<std::thread> cancellers;
  for (int i = 0; i < 40; ++i) {
    cancellers.emplace_back([&, i] {
      std::mt19937 rng(i);
      grpc::ClientContext ctx;
      auto stream = v2_stub->ModelStreamInfer(&ctx);
      stream->Write(large);
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 80)(rng)));
      ctx.TryCancel();
      inference::ModelStreamInferResponse ignored;
      while (stream->Read(&ignored)) {
      }
      stream->Finish();
    });
  }
  for (auto& t : cancellers) t.join();
  stop_busy = true;

  // The server still answers: health on a new connection, and a new request
  // behind the busy clients' last calls (each about a second of work).
  using Health = grpc::health::v1::HealthCheckResponse;
  EXPECT_EQ(HealthStatus(server->address(), "", std::chrono::seconds(30)), Health::SERVING) << server->Log();
  {
    inference::ModelInferRequest req;
    req.set_model_name("mlp");
    auto* in = req.add_inputs();
    in->set_name("x");
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(256);
    for (int i = 0; i < 256; ++i) in->mutable_contents()->add_fp32_contents(0.5f);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    inference::ModelInferResponse resp;
    grpc::Status s = v2_stub->ModelInfer(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  for (auto& t : busy) t.join();

  // Every cancelled request's share of the in-flight budget came back.
  bool budget_returned = false;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !budget_returned && std::chrono::steady_clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    std::string metrics;
    RunCommand({"/usr/bin/curl", "-s", "--max-time", "10", "http://" + server->metrics_address() + "/metrics"},
               &metrics);
    budget_returned = metrics.find("\ninfergate_inflight_request_bytes 0\n") != std::string::npos;
  }
  EXPECT_TRUE(budget_returned) << "the in-flight budget was not returned";

  // SIGTERM with nothing left to do ends the process cleanly: well inside
  // the 30 s drain timeout (the wedged server never exited at all).
  v1_stub.reset();
  v2_stub.reset();
  channel.reset();
  EXPECT_EQ(server->Stop(), 0) << server->Log();
}

}  // namespace
}  // namespace infergate::testing
