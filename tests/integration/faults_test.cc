// Broken models, slow models and failing devices: each fails alone while the server carries on.

#include "tests/common/scratch_dir.h"
#include "tests/integration/server_fixture.h"

namespace infergate::testing {
namespace {

TEST(Faults, CorruptModelIsServedOnceFixedInPlaceAndADeletedModelIsUnloaded) {
  namespace fs = std::filesystem;
  ScratchDir scratch("ig_faults_");
  const std::string repo = scratch.path();
  ASSERT_FALSE(repo.empty());
  fs::copy(DemoRepository() + "/mlp", repo + "/mlp", fs::copy_options::recursive);
  fs::copy(DemoRepository() + "/embed", repo + "/embed", fs::copy_options::recursive);
  fs::create_directories(repo + "/broken/1");
  std::ofstream(repo + "/broken/1/model.pt") << "not a model";
  std::ofstream(repo + "/broken/config.pbtxt")
      << "max_batch_size: 64\ninputs { name: \"x\" dtype: FLOAT32 dims: [256] }\n";
  auto server = ServerProcess::Start({"--model-repository=" + repo, "--repository-poll-interval=200ms"});
  ASSERT_NE(server, nullptr);
  auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  auto infer = [&](const std::string& model, v1::InferResponse* resp) {
    v1::InferRequest req;
    req.set_model(model);
    *req.add_inputs() = ToWire(at::randn({1, 256}), "x");
    grpc::ClientContext ctx;
    return stub->Infer(&ctx, req, resp);
  };
  v1::InferResponse resp;
  grpc::Status s = infer("broken", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("broken"), std::string::npos) << s.error_message();
  EXPECT_TRUE(infer("mlp", &resp).ok());
  // Fix the file in place (not atomically): until the poller has seen it
  // settle and loaded it, requests are told to retry, never run on a
  // half-copied file; then it answers.
  fs::copy_file(repo + "/mlp/1/model.pt", repo + "/broken/1/model.pt", fs::copy_options::overwrite_existing);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (s = infer("broken", &resp); !s.ok() && std::chrono::steady_clock::now() < until; s = infer("broken", &resp)) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(s.ok()) << s.error_message();

  // Delete mlp from disk: within two polls it is unloaded and gone, with a
  // clear status.
  fs::remove_all(repo + "/mlp");
  until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (s = infer("mlp", &resp); s.ok() && std::chrono::steady_clock::now() < until; s = infer("mlp", &resp)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_NE(s.error_message().find("'mlp' was removed from the model repository"), std::string::npos)
      << s.error_message();
  stub.reset();
  EXPECT_EQ(server->Stop(), 0);
}

// A model much slower than the client's deadline: the client gets
// DEADLINE_EXCEEDED, the server keeps answering others meanwhile and after.
// The bounds are parts of the slow model's own time, measured here (about
// a second on an idle machine, several under a sanitizer beside other
// tests).
TEST_F(ServerTest, ModelSlowerThanTheDeadlineTimesOutAloneAndTheServerCarriesOn) {
  v1::InferResponse resp;
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(Infer(Request("slow", {{"x", at::ones({4})}}), &resp, /*timeout_ms=*/600000).ok());
  const auto slow_takes = std::chrono::steady_clock::now() - start;
  std::cout << "the slow model takes " << std::chrono::duration_cast<std::chrono::milliseconds>(slow_takes).count()
            << " ms here\n";
  start = std::chrono::steady_clock::now();
  grpc::Status s = Infer(Request("slow", {{"x", at::ones({4})}}), &resp, /*timeout_ms=*/200);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(std::chrono::steady_clock::now() - start, slow_takes / 2 + std::chrono::milliseconds(200))
      << "the deadline's answer waited for the model";
  // The slow run still occupies one worker; the other serves mlp, without
  // waiting for it.
  start = std::chrono::steady_clock::now();
  ExpectAgreement("mlp", {{"x", at::randn({1, 256})}}, v1::FLOAT32);
  EXPECT_LT(std::chrono::steady_clock::now() - start, slow_takes / 2) << "mlp waited for the slow run";
  std::this_thread::sleep_for(slow_takes);
  ExpectAgreement("mlp", {{"x", at::randn({1, 256})}}, v1::FLOAT32);
  EXPECT_TRUE(server_->Alive());
}

// A simulated GPU that starts failing every call: its work moves to the CPU,
// it leaves service, and ListDevices and the metrics say so. Without
// background moves, the calls before the failures start are the requests'
// own: the moves' warm-ups (two runs each while a model's latency there is
// unknown) would count among them, as many as the moves made by then, and
// under ASan they once took all five before the first request.
class FailingDeviceTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override {
    return {"--simulate-devices=cuda:0", "--simulate-failing-devices=cuda:0", "--simulate-failures-after=5",
            "--background-moves=false"};
  }
};

TEST_F(FailingDeviceTest, WorkMovesToTheCpuAndTheDeviceShowsDown) {
  std::map<std::string, int> reasons;
  int on_cuda = 0;
  for (int i = 0; i < 10; ++i) {
    at::Tensor x = at::randn({1, 256});
    v1::InferRequest req = Request("mlp", {{"x", x}});
    req.set_device("cuda:0");
    v1::InferResponse resp;
    grpc::Status s = Infer(req, &resp);
    ASSERT_TRUE(s.ok()) << i << ": " << s.error_message();
    on_cuda += resp.placement().device() == "cuda:0";
    if (resp.placement().fell_back()) reasons[resp.placement().fallback_reason()]++;
    EXPECT_TRUE(at::allclose(FromWire(resp.outputs(0)), Reference("mlp", {x}), 5e-2, 5e-2));
  }
  EXPECT_GE(on_cuda, 1);
  EXPECT_EQ(reasons["device_error:cuda:0"], 1);
  EXPECT_EQ(reasons["device_out_of_service:cuda:0"], 10 - on_cuda - 1);
  grpc::ClientContext ctx;
  v1::ListDevicesResponse devices;
  ASSERT_TRUE(stub_->ListDevices(&ctx, v1::ListDevicesRequest(), &devices).ok());
  const v1::DeviceInfo* cuda = nullptr;
  for (const auto& d : devices.devices()) {
    if (d.id() == "cuda:0") cuda = &d;
  }
  ASSERT_NE(cuda, nullptr) << "simulated cuda:0 is missing from ListDevices";
  EXPECT_FALSE(cuda->available());
  std::string scrape;
  ASSERT_EQ(RunCommand({"/usr/bin/curl", "-s", "http://" + server_->metrics_address() + "/metrics"}, &scrape), 0);
  EXPECT_NE(scrape.find("infergate_device_up{device=\"cuda:0\",kind=\"cuda\",simulated=\"true\"} 0"),
            std::string::npos);
  EXPECT_NE(scrape.find("infergate_fallbacks_total{from=\"cuda:0\",reason=\"device_error\",to=\"cpu\"} 1"),
            std::string::npos);
}

// Connections are recycled after --max-connection-age; calls keep working
// across the reconnects, and the CLI reaches the server through a dns:///
// target with round_robin balancing.

}  // namespace
}  // namespace infergate::testing

namespace infergate::testing {
namespace {

class InflightBudgetTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override {
    return {"--max-inflight-bytes=1MiB", "--max-receive-bytes=1MiB"};
  }
};

// A large request holds most of the budget while it runs: another large one
// is refused at once with RESOURCE_EXHAUSTED, unread (its connection sends
// large requests, and there is no room for one), a small request on another
// connection is still served, and once the first is answered the budget is
// free again.
TEST_F(InflightBudgetTest, LargeRequestsBeyondTheBudgetAreRefusedWhileOthersAreServed) {
  v1::InferRequest large = Request("slow", {{"x", at::full({150000}, 1.0f)}});  // 600 KB, about a second of work
  ASSERT_GT(large.ByteSizeLong(), 512u * 1024);
  grpc::Status first;
  v1::InferResponse first_resp;
  std::thread holder([&] { first = Infer(large, &first_resp, 60000); });
  // Wait until the first one is on the device (so it holds its bytes).
  bool running = WaitForDevice(*stub_, SomethingInFlight);
  ASSERT_TRUE(running) << "the large request never started";
  v1::InferResponse resp;
  grpc::Status second = Infer(large, &resp);
  EXPECT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << second.error_message();
  EXPECT_NE(second.error_message().find("--max-inflight-bytes"), std::string::npos) << second.error_message();
  // /metrics names the reason; the model is "" (the budget is taken before
  // the name is checked against the repository, and an unchecked name a
  // client made up must not become a label).
  EXPECT_EQ(MetricValue(ScrapeMetrics(*server_), "infergate_rejections_total{model=\"\",reason=\"inflight_bytes\"}"),
            1.0);
  {
    // A connection of its own (distinct arguments: gRPC shares a connection
    // among channels made alike).
    grpc::ChannelArguments own_connection;
    own_connection.SetInt("infergate.test.small_client", 1);
    auto other = v1::InferenceService::NewStub(
        grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), own_connection));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const grpc::Status small = other->Infer(&ctx, Request("mlp", {{"x", at::randn({1, 256})}}), &resp);
    EXPECT_TRUE(small.ok()) << "a small request was refused: " << small.error_message();
  }
  holder.join();
  ASSERT_TRUE(first.ok()) << first.error_message();
  // The first call's bytes are released once gRPC is done with it, which
  // may be a moment after its client has the answer: the budget frees up.
  grpc::Status again = Infer(large, &resp, 60000);
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       again.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    again = Infer(large, &resp, 60000);
  }
  EXPECT_TRUE(again.ok()) << again.error_message();
}

class BurstBudgetTest : public ServerTest {
 protected:
  static constexpr uint64_t kBudgetMiB = 32;
  std::vector<std::string> ExtraArgs() const override {
    return {"--max-inflight-bytes=" + std::to_string(kBudgetMiB) + "MiB", "--max-receive-bytes=4MiB"};
  }
};

// A sustained burst of large requests sent without waiting for answers,
// worth many times the budget (without it the queue would hold all of
// them): the excess is refused with RESOURCE_EXHAUSTED (the budget's, or a
// read's that came too slowly on a starved machine), no call fails any
// other way, small requests from other clients keep being answered, and
// the server's peak resident memory grows by no more than the budget plus a
// stated margin. The margin covers what gRPC holds before a call reaches
// admission (the received message and its parsed copy, for the few calls
// arriving at once) and allocator slack.
TEST_F(BurstBudgetTest, ABurstBeyondTheBudgetIsRefusedAndMemoryStaysBounded) {
  constexpr int kLargeClients = 8, kEach = 25;
  constexpr uint64_t kMarginMiB = 128;  // measured: ~100 MiB growth with the budget, ~740 MiB without
  v1::InferRequest large = Request("slow", {{"x", at::full({900000}, 1.0f)}});  // 3.6 MB, about a second of work
  // Warm both models so their load is not part of the measurement.
  v1::InferResponse warm;
  ASSERT_TRUE(Infer(Request("slow", {{"x", at::ones({4})}}), &warm, 60000).ok());
  ASSERT_TRUE(Infer(Request("mlp", {{"x", at::randn({1, 256})}}), &warm).ok());
  const uint64_t before_kib = ProcStatusKib(server_->pid(), "VmRSS:");
  ASSERT_TRUE(ResetPeakRss(server_->pid()));

  std::atomic<int> ok{0}, exhausted{0}, overdue{0}, small_ok{0}, small_failed{0}, pending{0};
  std::mutex mu;
  std::string other;
  std::atomic<bool> burst_over{false};
  std::vector<std::thread> small;
  for (int c = 0; c < 2; ++c) {
    small.emplace_back([&] {
      auto stub =
          v1::InferenceService::NewStub(grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
      v1::InferRequest req = Request("mlp", {{"x", at::randn({1, 256})}});
      while (!burst_over.load()) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        v1::InferResponse resp;
        grpc::Status s = stub->Infer(&ctx, req, &resp);
        (s.ok() ? small_ok : small_failed)++;
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          other += "small: " + std::to_string(s.error_code()) + " " + s.error_message() + "\n";
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  // One call in flight: its context, reply and status outlive the send.
  struct Call {
    grpc::ClientContext ctx;
    v1::InferResponse resp;
  };
  // Each large client has a channel (a connection) of its own. The channels
  // are made here and outlive every call and callback: a client thread that
  // dropped its channel as soon as its last callback ran raced gRPC's own
  // release of that call (a double free in gRPC's completion queue, seen
  // once under ASan on a loaded machine).
  std::vector<std::unique_ptr<v1::InferenceService::Stub>> large_stubs;
  for (int c = 0; c < kLargeClients; ++c) {
    grpc::ChannelArguments own_connection;
    own_connection.SetInt("infergate.test.client", c);  // distinct arguments: no shared subchannel
    large_stubs.push_back(v1::InferenceService::NewStub(
        grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), own_connection)));
  }
  std::vector<std::thread> burst;
  for (int c = 0; c < kLargeClients; ++c) {
    burst.emplace_back([&, c] {
      v1::InferenceService::Stub* stub = large_stubs[c].get();
      for (int i = 0; i < kEach; ++i) {
        auto call = std::make_shared<Call>();
        call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
        pending++;
        stub->async()->Infer(&call->ctx, &large, &call->resp, [&, call](grpc::Status s) {
          if (s.ok()) {
            ok++;
          } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
                     s.error_message().find("--max-inflight-bytes") != std::string::npos) {
            exhausted++;
          } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
                     s.error_message().find("--min-receive-rate") != std::string::npos) {
            // A read that took past its deadline, refused cleanly and its
            // room given back. On a quiet machine none does; in the ASan
            // suite, with the slow model's batches and a neighbouring test
            // on both cores, 4 of 200 loopback reads of 3.6 MB did (and 21
            // with the deadline raised to 37 s, under a concurrent build:
            // why reads slowed that far is not established). Trickling
            // clients are intake_abuse_test's subject.
            overdue++;
          } else {
            std::lock_guard<std::mutex> lock(mu);
            other += "large: " + std::to_string(s.error_code()) + " " + s.error_message() + "\n";
          }
          pending--;
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  for (auto& t : burst) t.join();
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
       pending.load() > 0 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  burst_over = true;
  for (auto& t : small) t.join();
  ASSERT_EQ(pending.load(), 0) << "large calls still unanswered";
  const uint64_t peak_kib = ProcStatusKib(server_->pid(), "VmHWM:");
  const uint64_t growth_mib = peak_kib > before_kib ? (peak_kib - before_kib) / 1024 : 0;
  const uint64_t sent_mib = kLargeClients * kEach * large.ByteSizeLong() / (1024 * 1024);
  std::printf(
      "burst: %d large requests of %zu bytes (%llu MiB in all; %d OK, %d RESOURCE_EXHAUSTED, %d overdue), "
      "%d small OK; "
      "RSS before %llu MiB, peak %llu MiB, growth %llu MiB (budget %llu MiB + margin %llu MiB)\n",
      kLargeClients * kEach, large.ByteSizeLong(), static_cast<unsigned long long>(sent_mib), ok.load(),
      exhausted.load(), overdue.load(), small_ok.load(), static_cast<unsigned long long>(before_kib / 1024),
      static_cast<unsigned long long>(peak_kib / 1024), static_cast<unsigned long long>(growth_mib),
      static_cast<unsigned long long>(kBudgetMiB), static_cast<unsigned long long>(kMarginMiB));
  EXPECT_TRUE(other.empty()) << other;
  EXPECT_EQ(ok.load() + exhausted.load() + overdue.load(), kLargeClients * kEach);
  EXPECT_GT(exhausted.load(), 0) << "the burst never passed the budget";
  EXPECT_GT(ok.load(), 0) << "no large request was served";
  EXPECT_GT(small_ok.load(), 0);
  EXPECT_EQ(small_failed.load(), 0);
  // ASan keeps freed memory in quarantine (256 MiB by default), so RSS
  // says nothing about the budget there; the plain build checks it.
  if (MemoryBoundsApply()) {
    EXPECT_LE(growth_mib, kBudgetMiB + kMarginMiB);
  }
}

}  // namespace
}  // namespace infergate::testing

namespace infergate::testing {
namespace {

class WatchdogTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override { return {"--stuck-batch-timeout=300ms"}; }
  grpc::health::v1::HealthCheckResponse::ServingStatus Liveness() {
    auto health = grpc::health::v1::Health::NewStub(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::health::v1::HealthCheckRequest req;
    req.set_service("liveness");
    grpc::health::v1::HealthCheckResponse resp;
    EXPECT_TRUE(health->Check(&ctx, req, &resp).ok());
    return resp.status();
  }
  // Polls liveness until it is `want` or 20 s passed.
  bool LivenessBecomes(grpc::health::v1::HealthCheckResponse::ServingStatus want) {
    for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
         std::chrono::steady_clock::now() < deadline;) {
      if (Liveness() == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
};

// A batch that runs past --stuck-batch-timeout (here the one-second "slow"
// model against 300 ms) turns liveness NOT_SERVING, and liveness recovers
// when the batch ends; /metrics shows the batch's age meanwhile.
TEST_F(WatchdogTest, ABatchRunningPastTheLimitFailsLivenessUntilItEnds) {
  using Status = grpc::health::v1::HealthCheckResponse;
  EXPECT_EQ(Liveness(), Status::SERVING);
  grpc::Status slow;
  v1::InferResponse resp;
  std::thread caller([&] { slow = Infer(Request("slow", {{"x", at::ones({4})}}), &resp, 60000); });
  EXPECT_TRUE(LivenessBecomes(Status::NOT_SERVING)) << server_->Log();
  caller.join();
  ASSERT_TRUE(slow.ok()) << slow.error_message();
  EXPECT_TRUE(LivenessBecomes(Status::SERVING)) << server_->Log();
  EXPECT_NE(server_->Log().find("beyond --stuck-batch-timeout"), std::string::npos);
}

}  // namespace
}  // namespace infergate::testing

namespace infergate::testing {
namespace {

// A fatal signal leaves the signal and a symbolized stack trace in the
// server's log, and still ends the process by that signal.
TEST(Faults, AFatalSignalLeavesAStackTraceInTheLog) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers report fatal signals themselves; runs in the plain build";
#endif
  ScratchDir scratch("ig_crash_");
  ASSERT_FALSE(scratch.path().empty());
  std::filesystem::copy(DemoRepository() + "/mlp", scratch.path() + "/mlp", std::filesystem::copy_options::recursive);
  auto server = ServerProcess::Start({"--model-repository=" + scratch.path()});
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(kill(server->pid(), SIGSEGV), 0);
  EXPECT_EQ(server->WaitForExit(), -1) << "the process should end by the signal, not exit";
  const std::string log = server->Log();
  EXPECT_NE(log.find("*** SIGSEGV sent by process " + std::to_string(getpid())), std::string::npos) << log;
  // Frames are "@ 0xADDRESS NAME"; a stripped or unsymbolized trace names
  // every one "(unknown)".
  int frames = 0, named = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("@ 0x") == std::string::npos) continue;
    ++frames;
    if (line.find("(unknown)") == std::string::npos) ++named;
  }
  EXPECT_GE(frames, 2) << log;
  EXPECT_GE(named, 1) << log;
}

}  // namespace
}  // namespace infergate::testing
