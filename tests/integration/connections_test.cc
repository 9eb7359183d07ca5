// Connection lifetimes, stream limits and start-up.

#include "tests/integration/server_fixture.h"

namespace infergate::testing {
namespace {

TEST(Connections, MaxConnectionAgeRecyclesWithoutFailingCalls) {
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--max-connection-age=500ms"});
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  auto stub = v1::InferenceService::NewStub(channel);
  v1::InferRequest req;
  req.set_model("mlp");
  *req.add_inputs() = ToWire(at::randn({1, 256}), "x");
  // Counts the channel leaving READY: each is a connection the server closed.
  std::atomic<int> reconnects{0};
  std::atomic<bool> watching{true};
  std::thread watcher([&] {
    grpc_connectivity_state last = channel->GetState(false);
    while (watching.load()) {
      if (channel->WaitForStateChange(last, std::chrono::system_clock::now() + std::chrono::milliseconds(100))) {
        grpc_connectivity_state now = channel->GetState(false);
        if (last == GRPC_CHANNEL_READY && now != GRPC_CHANNEL_READY) reconnects++;
        last = now;
      }
    }
  });
  int failed = 0, ok = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  while (std::chrono::steady_clock::now() < end) {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);  // ride through the reconnect after a GOAWAY
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::InferResponse resp;
    if (stub->Infer(&ctx, req, &resp).ok()) {
      ok++;
    } else {
      failed++;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  watching = false;
  watcher.join();
  EXPECT_EQ(failed, 0);
  EXPECT_GT(ok, 20);
  EXPECT_GE(reconnects.load(), 2) << "connections older than 500 ms were not recycled in 2.5 s";
  std::string out;
  std::string port = server->address().substr(server->address().rfind(':') + 1);
  EXPECT_EQ(RunCommand({INFERGATE_CLI_BIN, "--address", "dns:///localhost:" + port, "--lb", "round_robin", "devices"},
                       &out),
            0)
      << out;
  EXPECT_NE(out.find("cpu"), std::string::npos);
  stub.reset();
  channel.reset();
  EXPECT_EQ(server->Stop(), 0);
}

// With one stream per connection, 8 concurrent calls on one channel are
// serialised by HTTP/2 flow control, not refused: all succeed. And the
// limit holds: two one-second calls on one connection take twice as long
// as on two connections (where two CPU workers run them side by side).
TEST(Connections, ConcurrentStreamLimitQueuesCallsInTheClient) {
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--max-concurrent-streams=1"});
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&] {
      auto stub = v1::InferenceService::NewStub(channel);
      v1::InferRequest req;
      req.set_model("mlp");
      *req.add_inputs() = ToWire(at::randn({1, 256}), "x");
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      v1::InferResponse resp;
      if (stub->Infer(&ctx, req, &resp).ok()) ok++;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 8);
  auto two_slow_calls = [&](bool one_connection) {
    grpc::ChannelArguments separate;
    separate.SetInt("infergate.test.unique", 1);  // a distinct channel argument: its own connection
    std::vector<std::shared_ptr<grpc::Channel>> channels = {
        channel, one_connection ? channel
                                : grpc::CreateCustomChannel(server->address(), grpc::InsecureChannelCredentials(),
                                                            separate)};
    auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> callers;
    std::atomic<int> slow_ok{0};
    for (auto& ch : channels) {
      callers.emplace_back([&, ch] {
        auto stub = v1::InferenceService::NewStub(ch);
        v1::InferRequest req;
        req.set_model("slow");
        *req.add_inputs() = ToWire(at::ones({4}), "x");
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
        v1::InferResponse resp;
        if (stub->Infer(&ctx, req, &resp).ok()) slow_ok++;
      });
    }
    for (auto& t : callers) t.join();
    EXPECT_EQ(slow_ok.load(), 2);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  two_slow_calls(false);  // loads slow
  const double parallel = two_slow_calls(false);
  const double serial = two_slow_calls(true);
  EXPECT_GT(serial, 1.5 * parallel) << "one connection " << serial << " s, two " << parallel << " s";
  channel.reset();
  EXPECT_EQ(server->Stop(), 0);
}

TEST(ServerStartup, FlagsComeFromTheEnvironmentToo) {
  std::string out;
  EXPECT_EQ(RunCommand({"/usr/bin/env", "INFERGATE_DRAIN_TIMEOUT=forever", INFERGATE_BIN, "--address=127.0.0.1:0",
                        "--model-repository=" + DemoRepository()},
                       &out),
            2);
}

TEST(ServerStartup, HelpListsFlagsAndMissingRepositoryFails) {
  std::string out;
  EXPECT_EQ(RunCommand({INFERGATE_BIN, "--help"}, &out), 0);
  EXPECT_NE(out.find("--model-repository"), std::string::npos);
  EXPECT_NE(out.find("--max-receive-bytes"), std::string::npos);
  out.clear();
  EXPECT_NE(RunCommand({INFERGATE_BIN, "--address=127.0.0.1:0", "--model-repository=/nonexistent/ig"}, &out), 0);
  out.clear();
  EXPECT_EQ(RunCommand({INFERGATE_BIN, "--bogus-flag"}, &out), 2);
}

}  // namespace
}  // namespace infergate::testing
