// The Server in process: it starts with every port bound and readiness
// NOT_SERVING, serves once warm, and drains in order: readiness turns
// NOT_SERVING while liveness stays SERVING and the port stays open, new
// inference is refused on every front end, requests accepted before the
// drain are answered, and only then do the ports close.

#include "service/server/server.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include "inference/grpc_service.grpc.pb.h"
#include "scheduler/core/inference_core.h"
#include "tests/common/build_paths.h"

namespace infergate {
namespace {

using std::chrono::seconds;

// The demo models (with the test models: `slow`), made once per process.
const std::string& DemoRepository() {
  static const std::string* dir = [] {
    std::string path = ::testing::TempDir() + "/ig_server_models_XXXXXX";
    EXPECT_NE(mkdtemp(path.data()), nullptr);
    const std::string command =
        std::string(testing::MakeDemoModelsBinary()) + " " + path + " --with-test-models >/dev/null";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    static const std::string* const made = new std::string(path);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(*made, ec);
    });
    return made;
  }();
  return *dir;
}

ServerOptions Options(std::vector<std::string> flags) {
  std::vector<const char*> argv = {"infergate"};
  for (const std::string& f : flags) argv.push_back(f.c_str());
  std::string help;
  absl::StatusOr<ServerOptions> parsed = ParseServerOptions(static_cast<int>(argv.size()), argv.data(), &help);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return *parsed;
}

// grpc.health.v1.Health/Check for `service`, encoded by hand (field 1, a
// string; the answer's field 1 is 1 SERVING, 2 NOT_SERVING): 0 when the
// call fails.
int HealthStatus(grpc::Channel& channel, const std::string& service) {
  grpc::GenericStub stub(std::shared_ptr<grpc::Channel>(&channel, [](grpc::Channel*) {}));
  std::string request = std::string("\x0a", 1) + static_cast<char>(service.size()) + service;
  grpc::Slice slice(request);
  grpc::ByteBuffer sent(&slice, 1), received;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &sent, &received,
                 [&done](grpc::Status s) { done.set_value(s); });
  if (!done.get_future().get().ok()) return 0;
  std::vector<grpc::Slice> slices;
  (void)received.Dump(&slices);
  std::string answer;
  for (const grpc::Slice& s : slices) answer.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (answer.empty()) return 0;  // status 0 (UNKNOWN) is the empty message
  return answer.size() == 2 && answer[0] == '\x08' ? answer[1] : -1;
}

constexpr int kServing = 1, kNotServing = 2;

inference::ModelInferRequest SlowRequest() {
  inference::ModelInferRequest req;
  req.set_model_name("slow");
  auto* in = req.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(4);
  const float values[4] = {2, 2, 2, 2};
  req.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  return req;
}

size_t HeldOnCpu(InferenceCore& core) {
  size_t held = 0;
  for (const DeviceStatus& d : core.Devices()) held += d.in_flight + d.queue_depth;
  return held;
}

TEST(Server, StartsNotReadyServesWhenWarmAndDrainsInOrder) {
  auto created =
      Server::Create(Options({"--model-repository=" + DemoRepository(), "--address=127.0.0.1:0",
                              "--http-address=127.0.0.1:0", "--metrics-address=127.0.0.1:0", "--cpu-workers=1"}),
                     "test");
  ASSERT_TRUE(created.ok()) << created.status();
  Server& server = **created;
  ASSERT_GT(server.port(), 0);
  EXPECT_GT(server.http_port(), 0);
  EXPECT_GT(server.metrics_port(), 0);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port()), grpc::InsecureChannelCredentials());
  EXPECT_EQ(HealthStatus(*channel, ""), kNotServing) << "ready before the repository was scanned";
  EXPECT_EQ(HealthStatus(*channel, "liveness"), kServing);
  ASSERT_TRUE(server.StartCore().ok());
  EXPECT_EQ(HealthStatus(*channel, ""), kNotServing) << "SetServing decides readiness";
  server.SetServing();
  for (const char* service : {"", "infergate.v1.InferenceService", "inference.GRPCInferenceService"}) {
    EXPECT_EQ(HealthStatus(*channel, service), kServing) << service;
  }

  // Three one-second requests on one worker: the drain starts while they
  // are held, and they are answered.
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  std::vector<std::thread> accepted;
  std::atomic<int> answered_ok{0};
  for (int i = 0; i < 3; ++i) {
    accepted.emplace_back([&] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + seconds(300));
      inference::ModelInferResponse resp;
      if (stub->ModelInfer(&ctx, SlowRequest(), &resp).ok()) answered_ok++;
    });
  }
  for (auto end = std::chrono::steady_clock::now() + seconds(120);
       HeldOnCpu(server.core()) < 3 && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(HeldOnCpu(server.core()), 3u);
  std::future<bool> drained = std::async(
      std::launch::async, [&server] { return server.Drain(std::chrono::steady_clock::now() + seconds(300)); });
  for (auto end = std::chrono::steady_clock::now() + seconds(60);
       HealthStatus(*channel, "") != kNotServing && std::chrono::steady_clock::now() < end;) {
  }
  // While the accepted work runs: not ready, still live, new work refused.
  const bool still_held = HeldOnCpu(server.core()) > 0;
  EXPECT_EQ(HealthStatus(*channel, ""), kNotServing);
  EXPECT_EQ(HealthStatus(*channel, "inference.GRPCInferenceService"), kNotServing);
  EXPECT_EQ(HealthStatus(*channel, "liveness"), kServing);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(30));
    inference::ModelInferResponse resp;
    grpc::Status refused = stub->ModelInfer(&ctx, SlowRequest(), &resp);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
    EXPECT_NE(refused.error_message().find("draining"), std::string::npos) << refused.error_message();
  }
  {
    grpc::ClientContext ctx;
    inference::ServerReadyResponse ready;
    ASSERT_TRUE(stub->ServerReady(&ctx, inference::ServerReadyRequest(), &ready).ok());
    EXPECT_FALSE(ready.ready());
  }
  EXPECT_TRUE(still_held) << "the accepted work ended before the drain was seen; the checks above prove less";
  for (auto& t : accepted) t.join();
  EXPECT_EQ(answered_ok.load(), 3) << "requests accepted before the drain were not all answered";
  EXPECT_TRUE(drained.get());
  // The ports are closed now.
  EXPECT_EQ(HealthStatus(*channel, "liveness"), 0);
  EXPECT_EQ(server.http_port(), 0);
}

TEST(Server, APortInUseIsUnavailable) {
  auto first = Server::Create(Options({"--model-repository=" + DemoRepository(), "--address=127.0.0.1:0",
                                       "--http-address=", "--metrics-address="}),
                              "test");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = Server::Create(
      Options({"--model-repository=" + DemoRepository(), "--address=127.0.0.1:" + std::to_string((*first)->port()),
               "--http-address=", "--metrics-address="}),
      "test");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

}  // namespace
}  // namespace infergate
