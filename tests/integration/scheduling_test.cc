// Batching, queue limits, deadlines, drain and mixed load through the real server.

#include <torch/script.h>

#include <cstdlib>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tests/common/build_paths.h"
#include "tests/common/scratch_dir.h"
#include "tests/integration/server_fixture.h"

namespace infergate::testing {
namespace {

TEST_F(ServerTest, SixtyFourClientsAreBatchedAndEachGetsItsOwnRow) {
  constexpr int kClients = 64, kEach = 15;
  std::vector<at::Tensor> inputs;
  for (int i = 0; i < kClients * kEach; ++i) inputs.push_back(at::randn({1, 256}));
  at::Tensor expected = Reference("mlp", {at::cat(inputs, 0)});
  std::atomic<int> wrong{0}, failed{0}, batched{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto stub = v1::InferenceService::NewStub(channel_);
      for (int k = 0; k < kEach; ++k) {
        int i = c * kEach + k;
        grpc::ClientContext ctx;
        v1::InferResponse resp;
        if (!stub->Infer(&ctx, Request("mlp", {{"x", inputs[i]}}), &resp).ok()) {
          failed++;
          continue;
        }
        if (resp.placement().batch_size() > 1) batched++;
        if (!at::allclose(FromWire(resp.outputs(0)), expected.narrow(0, i, 1), 1e-4, 1e-5)) wrong++;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(batched.load(), 0) << "no request ran in a batch larger than one";
}

// The demo cnn has priority_levels: 2; mlp has none, so any priority is
// equal there.
TEST_F(ServerTest, APriorityIsCheckedAgainstTheModelsLevels) {
  v1::InferResponse resp;
  v1::InferRequest cnn = Request("cnn", {{"image", at::randn({1, 3, 64, 64})}});
  cnn.set_priority(3);
  grpc::Status s = Infer(cnn, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("priority: 3"), std::string::npos) << s.error_message();
  cnn.set_priority(1);
  EXPECT_TRUE(Infer(cnn, &resp).ok());
  v1::InferRequest mlp = Request("mlp", {{"x", at::randn({1, 256})}});
  mlp.set_priority(7);
  EXPECT_TRUE(Infer(mlp, &resp).ok());
}

// While clients flood the cnn, ListDevices names the model whose requests
// wait, with how many.
TEST_F(ServerTest, ListDevicesShowsEachModelsQueueUnderLoad) {
  std::atomic<bool> stop{false};
  std::atomic<int> failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 24; ++c) {
    clients.emplace_back([&] {
      auto stub = v1::InferenceService::NewStub(channel_);
      v1::InferRequest req = Request("cnn", {{"image", at::randn({1, 3, 64, 64})}});
      while (!stop.load()) {
        grpc::ClientContext ctx;
        v1::InferResponse resp;
        if (!stub->Infer(&ctx, req, &resp).ok()) failed++;
      }
    });
  }
  bool seen = false;
  uint32_t depth = 0;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !seen && std::chrono::steady_clock::now() < deadline;) {
    grpc::ClientContext ctx;
    v1::ListDevicesResponse devices;
    ASSERT_TRUE(stub_->ListDevices(&ctx, v1::ListDevicesRequest(), &devices).ok());
    for (const auto& d : devices.devices()) {
      for (const auto& q : d.model_queues()) {
        if (d.id() == "cpu" && q.model() == "cnn" && q.version() == 1 && q.depth() > 0) {
          seen = true;
          depth = q.depth();
          EXPECT_LE(q.depth(), d.queue_depth());
        }
        EXPECT_NE(q.model(), "mlp") << "mlp has nothing waiting";
      }
    }
  }
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_TRUE(seen) << "ListDevices never showed the cnn's queue";
  EXPECT_LE(depth, 24u);
  EXPECT_EQ(failed.load(), 0);
}

class OneWorkerTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override { return {"--cpu-workers=1", "--queue-capacity=2"}; }
};

TEST_F(OneWorkerTest, FullQueueAnswersResourceExhaustedNamingTheDevice) {
  std::atomic<int> exhausted{0}, ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&] {
      auto stub = v1::InferenceService::NewStub(channel_);
      v1::InferRequest req = Request("cnn", {{"image", at::randn({32, 3, 64, 64})}});
      req.set_device("cpu");
      grpc::ClientContext ctx;
      v1::InferResponse resp;
      grpc::Status s = stub->Infer(&ctx, req, &resp);
      if (s.ok()) ok++;
      if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
          s.error_message().find("cpu") != std::string::npos) {
        exhausted++;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_GT(exhausted.load(), 0);
  EXPECT_GT(ok.load(), 0);
  EXPECT_EQ(exhausted.load() + ok.load(), 16);
}

// One worker and no fair-share thread (which would run another model's
// request at once, beside the running hog): requests queue behind the hogs.
class DeadlineTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override {
    return {"--cpu-workers=1", "--batching=false", "--fair-queueing=false"};
  }
};

TEST_F(DeadlineTest, RequestWhoseDeadlinePassesInTheQueueNeverRuns) {
  // Keep the only worker busy with calls of about a second each, and wait
  // until one of them is queued behind the one running: a request sent then
  // waits at least that second, far past its 300 ms deadline.
  std::vector<std::thread> hogs;
  for (int i = 0; i < 2; ++i) {
    hogs.emplace_back([&] {
      auto stub = v1::InferenceService::NewStub(channel_);
      grpc::ClientContext ctx;
      v1::InferResponse resp;
      stub->Infer(&ctx, Request("slow", {{"x", at::ones({4})}}), &resp);
    });
  }
  bool queued = false;
  for (int i = 0; i < 5000 && !queued; ++i) {
    grpc::ClientContext ctx;
    v1::ListDevicesResponse devices;
    ASSERT_TRUE(stub_->ListDevices(&ctx, v1::ListDevicesRequest(), &devices).ok());
    queued = devices.devices(0).queue_depth() >= 1;
    if (!queued) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(queued) << "the hogs never queued up";
  v1::InferRequest req = Request("versioned", {{"x", at::ones({1, 2})}});
  v1::InferResponse resp;
  grpc::Status s = Infer(req, &resp, /*timeout_ms=*/300);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  for (auto& t : hogs) t.join();
  // Never loaded, so never run: the model is not resident anywhere.
  grpc::ClientContext ctx;
  v1::ListModelsResponse models;
  ASSERT_TRUE(stub_->ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
  const v1::ModelInfo* versioned = nullptr;
  for (const auto& m : models.models()) {
    if (m.name() == "versioned") versioned = &m;
  }
  ASSERT_NE(versioned, nullptr) << "ListModels lacks 'versioned'";
  EXPECT_EQ(versioned->loaded_size(), 0);
  ASSERT_TRUE(Infer(req, &resp).ok());
}

// Clients calling mlp in a loop until stopped, each answer checked and
// each outcome counted: what a drain must account for.
class MlpLoad {
 public:
  MlpLoad(const std::string& address, int clients) : x_(at::randn({1, 256})), expected_(Reference("mlp", {x_})) {
    for (int c = 0; c < clients; ++c) threads_.emplace_back([this, address] { Run(address); });
  }
  ~MlpLoad() { Stop(); }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  std::atomic<int> ok{0}, unavailable{0}, wrong{0}, other{0}, sent{0}, teardown{0};
  std::string OtherErrors() {
    std::lock_guard<std::mutex> lock(mu_);
    return other_errors_;
  }

 private:
  void Run(const std::string& address) {
    auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    v1::InferRequest req;
    req.set_model("mlp");
    *req.add_inputs() = ToWire(x_, "x");
    while (!stop_.load()) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      v1::InferResponse resp;
      sent++;
      grpc::Status s = stub->Infer(&ctx, req, &resp);
      if (s.ok()) {
        ok++;
        if (!at::allclose(FromWire(resp.outputs(0)), expected_, 1e-5, 1e-5)) wrong++;
      } else if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
        unavailable++;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      } else if (s.error_code() == grpc::StatusCode::CANCELLED &&
                 (s.error_message().empty() || s.error_message() == "CANCELLED")) {
        // gRPC's own teardown: a call that reached the connection in the
        // instant the server closed it, before any handler saw it. gRPC
        // core ends such never-started calls with CANCELLED rather than
        // UNAVAILABLE (grpc/grpc#41785, open upstream), so the test
        // counts them as refused-before-start, bounds how many, and checks
        // with the server's own tally that none of them was a call it
        // answered (ExpectEveryAnswerArrived).
        teardown++;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      } else {
        other++;
        std::lock_guard<std::mutex> lock(mu_);
        other_errors_ += std::to_string(s.error_code()) + ": " + s.error_message() + "\n";
      }
    }
  }

  at::Tensor x_, expected_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string other_errors_;
  std::vector<std::thread> threads_;
};

// The HTTP status `path` answers on `server`'s REST port; 0 when none.
int RestStatus(const ServerProcess& server, const std::string& path) {
  std::string code;
  RunCommand({"/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5",
              "http://" + server.http_address() + path},
             &code);
  return std::atoi(code.c_str());
}

// Every readiness surface says "not ready" and every liveness surface says
// "live", as `when` requires (during warm-up, while draining): gRPC health
// for "" and for the named services (Kubernetes' gRPC probe asks for
// infergate.v1.InferenceService, KServe's for the Open Inference one) answers
// NOT_SERVING, the Open Inference Protocol's ServerReady is false, REST
// readiness is not 200 and TorchServe's /ping is 500; gRPC liveness answers
// SERVING and REST liveness 200.
::testing::AssertionResult NotReadyButLive(const ServerProcess& server, const std::string& when) {
  using Status = grpc::health::v1::HealthCheckResponse;
  for (const char* service : {"", "infergate.v1.InferenceService", "inference.GRPCInferenceService"}) {
    if (const Status::ServingStatus named = HealthStatus(server.address(), service, std::chrono::seconds(2));
        named != Status::NOT_SERVING) {
      return ::testing::AssertionFailure()
             << "gRPC readiness of '" << service << "' answered " << Status::ServingStatus_Name(named) << " " << when;
    }
  }
  {
    auto open_inference = ::inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    ::inference::ServerReadyResponse ready_answer;
    if (!open_inference->ServerReady(&ctx, ::inference::ServerReadyRequest(), &ready_answer).ok() ||
        ready_answer.ready()) {
      return ::testing::AssertionFailure() << "the Open Inference Protocol's ServerReady was not false " << when;
    }
  }
  if (const Status::ServingStatus live = HealthStatus(server.address(), "liveness", std::chrono::seconds(2));
      live != Status::SERVING) {
    return ::testing::AssertionFailure() << "gRPC liveness answered " << Status::ServingStatus_Name(live) << " "
                                         << when;
  }
  if (const int code = RestStatus(server, "/v2/health/ready"); code == 200 || code == 0) {
    return ::testing::AssertionFailure() << "REST readiness answered " << code << " " << when;
  }
  if (const int code = RestStatus(server, "/v2/health/live"); code != 200) {
    return ::testing::AssertionFailure() << "REST liveness answered " << code << " " << when;
  }
  // TorchServe's health check answers 500 (Unhealthy) while it cannot serve.
  if (const int code = RestStatus(server, "/ping"); code != 500) {
    return ::testing::AssertionFailure() << "TorchServe's /ping answered " << code << " " << when;
  }
  return ::testing::AssertionSuccess();
}

// Waits (up to 30 s) until probes see the drain, and says what they saw
// (NotReadyButLive, while draining); gRPC liveness still answers SERVING
// 200 ms later. Callers keep a slow request (about a second) in flight, so
// the drain lasts until they have looked.
::testing::AssertionResult ProbesSeeTheDrain(const ServerProcess& server) {
  using Status = grpc::health::v1::HealthCheckResponse;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       std::chrono::steady_clock::now() < deadline;) {
    const Status::ServingStatus ready = HealthStatus(server.address(), "", std::chrono::seconds(2));
    if (ready == Status::SERVING) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (ready != Status::NOT_SERVING) {
      return ::testing::AssertionFailure() << "gRPC readiness gave no answer during the drain (port closed?)";
    }
    if (::testing::AssertionResult probes = NotReadyButLive(server, "while draining"); !probes) return probes;
    // And still so well into the drain, where a kubelet's next probe lands.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (const Status::ServingStatus live = HealthStatus(server.address(), "liveness", std::chrono::seconds(2));
        live != Status::SERVING) {
      return ::testing::AssertionFailure()
             << "gRPC liveness answered " << Status::ServingStatus_Name(live) << " 200 ms into the drain";
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "gRPC readiness still SERVING after 30 s";
}

// How the server says its inference calls ended, by status code name, from
// the line it logs when its drain ends ("answered 9 inference calls: OK 8,
// UNAVAILABLE 1; 1 refused while draining"), with "total" and "draining";
// empty when there is no such line.
std::map<std::string, int> AnsweredByTheServer(const std::string& log) {
  std::map<std::string, int> out;
  const size_t line = log.rfind("] answered ");
  if (line == std::string::npos) return out;
  std::string text = log.substr(line + 11, log.find('\n', line) - line - 11);
  const size_t semicolon = text.find(';');
  out["draining"] = semicolon == std::string::npos ? 0 : std::atoi(text.c_str() + semicolon + 1);
  std::istringstream in(text.substr(0, semicolon));
  int total = 0;
  std::string word;
  in >> total >> word >> word;  // "N inference calls[:]"
  out["total"] = total;
  for (std::string code; in >> code;) {
    int n = 0;
    in >> n;
    in.ignore(1);  // ','
    out[code] = n;
  }
  return out;
}

// Every call the server answered OK reached its client as OK, and it ended
// no call otherwise than OK or the drain's UNAVAILABLE: the calls a client
// saw end with a bare CANCELLED at teardown never reached the server.
// `others_ok` are the test's calls outside `load` (its slow call).
void ExpectEveryAnswerArrived(const ServerProcess& server, const MlpLoad& load, int others_ok) {
  std::map<std::string, int> answered = AnsweredByTheServer(server.Log());
  ASSERT_TRUE(answered.count("total")) << "no 'answered ... inference calls' line:\n" << server.Log();
  EXPECT_EQ(answered["OK"], load.ok.load() + others_ok)
      << "the server answered " << answered["OK"] << " calls OK, its clients got " << load.ok.load() + others_ok;
  EXPECT_EQ(answered["total"], answered["OK"] + answered["UNAVAILABLE"]) << server.Log();
  // Every UNAVAILABLE was a drain refusal (the front end's, or the core's
  // for a call admitted in the instant the drain began).
  EXPECT_EQ(answered["UNAVAILABLE"], answered["draining"]) << server.Log();
  EXPECT_GE(load.unavailable.load(), answered["UNAVAILABLE"]) << "refusals the clients did not get";
}

// One call to the `slow` model (about a second of work) on a thread of its
// own; Running() waits until the server runs it.
class SlowCall {
 public:
  explicit SlowCall(const std::string& address)
      : stub_(v1::InferenceService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    request_.set_model("slow");
    *request_.add_inputs() = ToWire(at::full({4}, 2.0f), "x");
    thread_ = std::thread([this] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      status_ = stub_->Infer(&ctx, request_, &response_);
      done_ = true;
    });
  }
  ~SlowCall() {
    if (thread_.joinable()) thread_.join();
  }
  // Waits until something runs: call it while the slow call is the only work.
  bool Running() { return WaitForDevice(*stub_, SomethingInFlight); }
  bool Done() const { return done_.load(); }
  // Joins the call; OK with its input echoed back, or why not.
  ::testing::AssertionResult AnsweredOk() {
    thread_.join();
    if (!status_.ok())
      return ::testing::AssertionFailure() << "code " << status_.error_code() << ": " << status_.error_message();
    if (response_.outputs_size() != 1 || !at::equal(FromWire(response_.outputs(0)), at::full({4}, 2.0f))) {
      return ::testing::AssertionFailure() << "wrong answer";
    }
    return ::testing::AssertionSuccess();
  }

 private:
  std::unique_ptr<v1::InferenceService::Stub> stub_;
  v1::InferRequest request_;
  v1::InferResponse response_;
  grpc::Status status_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// SIGTERM under load, with a slow request running: readiness turns
// NOT_SERVING, the slow request is answered, and every other request
// completes correctly or is refused with UNAVAILABLE; the client side
// accounts for every single one.
TEST(Drain, SigtermUnderLoadLosesNoAcceptedRequest) {
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--drain-timeout=20s"});
  ASSERT_NE(server, nullptr);
  // The slow call first, while it is the only work: what runs is it (with
  // the load already running, an mlp call in flight would pass for it).
  SlowCall slow(server->address());
  ASSERT_TRUE(slow.Running()) << "the slow request never started";
  MlpLoad load(server->address(), 8);
  // Twenty mlp calls take a tenth of the slow call's time or less, on any
  // machine (both run on the same CPU workers).
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       load.ok.load() < 20 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_FALSE(slow.Done()) << "the slow call ended before the load was under way: nothing to drain";
  int before = load.ok.load();
  kill(server->pid(), SIGTERM);
  EXPECT_TRUE(ProbesSeeTheDrain(*server));
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       load.unavailable.load() + load.teardown.load() < 8 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  load.Stop();
  EXPECT_TRUE(slow.AnsweredOk()) << server->Log();
  EXPECT_EQ(server->WaitForExit(), 0) << server->Log();
  EXPECT_GE(before, 20);
  EXPECT_EQ(load.wrong.load(), 0);
  EXPECT_EQ(load.other.load(), 0) << "requests neither answered nor refused with UNAVAILABLE:\n" << load.OtherErrors();
  EXPECT_EQ(load.ok.load() + load.unavailable.load() + load.teardown.load(), load.sent.load());
  EXPECT_LE(load.teardown.load(), 8) << "at most one call per client can be caught by the final teardown";
  ExpectEveryAnswerArrived(*server, load, 1);
  EXPECT_GT(load.unavailable.load(), 0);
  EXPECT_NE(server->Log().find("draining"), std::string::npos);
}

// A second SIGTERM (an impatient operator, or a supervisor that repeats
// itself) must not cut the drain short, whichever thread the kernel hands
// it to: under load, a request running when both arrive is still answered,
// and every other call is answered or refused with UNAVAILABLE.
TEST(Drain, SecondSigtermDoesNotCutTheDrainShort) {
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--drain-timeout=30s"});
  ASSERT_NE(server, nullptr);
  SlowCall slow(server->address());
  // The slow request is the only work, so whatever is in flight.
  ASSERT_TRUE(slow.Running()) << "the slow request never started";
  MlpLoad load(server->address(), 4);
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       load.ok.load() < 20 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_FALSE(slow.Done()) << "the slow call ended before the load was under way: nothing to drain";
  kill(server->pid(), SIGTERM);
  EXPECT_TRUE(ProbesSeeTheDrain(*server));
  kill(server->pid(), SIGTERM);
  load.Stop();
  EXPECT_TRUE(slow.AnsweredOk()) << server->Log();
  EXPECT_EQ(server->WaitForExit(), 0) << server->Log();
  EXPECT_NE(server->Log().find("ignored 1 more stop signal(s) while draining"), std::string::npos) << server->Log();
  EXPECT_EQ(load.wrong.load(), 0);
  EXPECT_EQ(load.other.load(), 0) << load.OtherErrors();
  EXPECT_EQ(load.ok.load() + load.unavailable.load() + load.teardown.load(), load.sent.load());
  EXPECT_LE(load.teardown.load(), 4);
  ExpectEveryAnswerArrived(*server, load, 1);
}

// A third stop signal ends the process at once with status 130 (an
// operator who means it), though a batch runs and the drain has 30 s left.
// SIGINT counts like SIGTERM; the middle one is a SIGINT so that the kernel
// cannot merge two pending SIGTERMs into one.
TEST(Drain, AThirdStopSignalEndsTheProcessAtOnceWithStatus130) {
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--drain-timeout=30s"});
  ASSERT_NE(server, nullptr);
  SlowCall slow(server->address());
  ASSERT_TRUE(slow.Running()) << "the slow request never started";
  kill(server->pid(), SIGTERM);
  EXPECT_TRUE(ProbesSeeTheDrain(*server));
  kill(server->pid(), SIGINT);
  kill(server->pid(), SIGTERM);
  EXPECT_EQ(server->WaitForExit(), 130) << server->Log();
  EXPECT_FALSE(slow.AnsweredOk()) << "the process outlived the slow call: the third signal did not end it";
}

// Stop signals that arrive while models warm up (here `slow`, about a
// second of work, warmed on start) neither kill the process nor are lost:
// a second signal is ignored too, and the drain runs once warm-up ends,
// with exit status 0. The exit is awaited for up to two minutes: in a
// loaded ASan suite, on a slow day, the load (whose accuracy check runs the
// model) and the warm-up took 30 s between them (about 10 s a run of
// `slow`), and the drain ended just past WaitForExit's usual 30 s.
TEST(Drain, SignalsDuringWarmUpDrainAfterIt) {
  namespace fs = std::filesystem;
  ScratchDir scratch("ig_warmup_");
  const std::string repo = scratch.path();
  ASSERT_FALSE(repo.empty());
  fs::copy(DemoRepository() + "/slow", repo + "/slow", fs::copy_options::recursive);
  std::ofstream(repo + "/slow/config.pbtxt") << "inputs { name: \"x\" dtype: FLOAT32 dims: [-1] }\nwarmup: true\n";
  auto server = ServerProcess::Launch({"--model-repository=" + repo, "--drain-timeout=30s"});
  ASSERT_NE(server, nullptr);
  // Launch returns at the "listening" line, printed before warm-up starts.
  kill(server->pid(), SIGTERM);
  // Two signals sent at once may reach the process as one; the second is
  // sent once the server has logged the first.
  bool seen = false;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !seen && std::chrono::steady_clock::now() < deadline;) {
    seen = server->Log().find("during start-up: draining once warm-up ends") != std::string::npos;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(seen) << server->Log();
  kill(server->pid(), SIGTERM);
  EXPECT_EQ(server->WaitForExit(std::chrono::minutes(2)), 0) << server->Log();
  const std::string log = server->Log();
  EXPECT_NE(log.find("draining"), std::string::npos) << log;
  EXPECT_NE(log.find("ignored 1 more stop signal(s) while draining"), std::string::npos) << log;
}

// Samples `server`'s /metrics until `seen` holds of a scrape, or 60 s pass;
// returns that scrape, or "".
std::string ScrapeUntil(const ServerProcess& server, const std::function<bool(const std::string&)>& seen) {
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(5))) {
    std::string scrape = ScrapeMetrics(server);
    if (seen(scrape)) return scrape;
  }
  return "";
}

// Readiness stays off until warm-up ends: while a model warms up every
// readiness surface says not ready and liveness says live
// (NotReadyButLive), and `infergate-cli health` exits 1 printing
// NOT_SERVING (0 for --service liveness); once ready it exits 0, and 2 when
// no server answers. The model warms up with about four seconds of matrix
// products (four times `slow`); the log shows whether warm-up was still
// under way when the checks were done, so a machine fast enough to finish
// first fails the test loudly instead of passing it unchecked.
TEST(Health, NotReadyWhileModelsWarmUpAndTheCliExitCodeSaysSo) {
  namespace fs = std::filesystem;
  using Status = grpc::health::v1::HealthCheckResponse;
  const ScratchDir scratch("ig_warm_ready_");
  const fs::path repo = scratch.path();
  WriteMatrixProductModel(repo / "warm", 256, "warmup: true\n");
  auto server = ServerProcess::Launch({"--model-repository=" + repo.string()});
  ASSERT_NE(server, nullptr);
  // Launch returns at the "listening" line, printed before warm-up starts.
  auto warmed_up = [&] { return server->Log().find("warm-up of model 'warm'") != std::string::npos; };
  auto cli_health = [&](std::vector<std::string> extra, std::string* out) {
    std::vector<std::string> argv = {InfergateCliBinary(), "--address", server->address(), "--timeout-ms", "10000"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back("health");
    return RunCommand(argv, out);
  };
  EXPECT_TRUE(NotReadyButLive(*server, "during warm-up"));
  std::string ready_out, live_out;
  const int ready_exit = cli_health({}, &ready_out);
  const int live_exit = cli_health({"--service", "liveness"}, &live_out);
  ASSERT_FALSE(warmed_up()) << "warm-up ended before the checks were done, so they proved nothing: give the test a "
                               "heavier warm-up model\n"
                            << server->Log();
  EXPECT_EQ(ready_exit, 1) << ready_out;
  EXPECT_NE(ready_out.find("NOT_SERVING"), std::string::npos) << ready_out;
  EXPECT_EQ(live_exit, 0) << live_out;
  EXPECT_NE(live_out.find("SERVING"), std::string::npos) << live_out;

  // Ready once warm-up has ended, and never before.
  Status::ServingStatus ready = Status::UNKNOWN;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
       ready != Status::SERVING && std::chrono::steady_clock::now() < deadline;) {
    ready = HealthStatus(server->address(), "", std::chrono::seconds(2));
    if (ready != Status::SERVING) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(ready, Status::SERVING) << server->Log();
  EXPECT_TRUE(warmed_up()) << "ready before warm-up ended\n" << server->Log();
  std::string serving_out;
  EXPECT_EQ(cli_health({}, &serving_out), 0) << serving_out;
  EXPECT_EQ(serving_out, "SERVING\n");
  EXPECT_EQ(RestStatus(*server, "/ping"), 200) << "TorchServe's /ping once ready";
  const std::string address = server->address();
  EXPECT_EQ(server->Stop(), 0);
  // No server at all: neither SERVING nor NOT_SERVING, but a failed check.
  std::string none_out;
  EXPECT_EQ(RunCommand({InfergateCliBinary(), "--address", address, "--timeout-ms", "2000", "health"}, &none_out), 2)
      << none_out;
}

// A model's queue policy through the real server, and the metrics that
// show it. One CPU worker; each model does one slow call's work (64
// products) per call, so what waits behind a running call waits that long.
// - `capped` (max_queue_size 1) queues one call behind its running one
//   (infergate_model_queue_depth 1, infergate_device_oldest_running_batch_seconds
//   above 0 while it runs) and refuses the next with RESOURCE_EXHAUSTED naming
//   the model; both accepted calls are answered.
// - `timed` (default_timeout_microseconds 100 ms, REJECT) answers a call that
//   waited behind a running one UNAVAILABLE, without running it.
// Each refusal is counted under its reason in infergate_rejections_total.
TEST(QueuePolicy, AModelsQueueLimitAndQueueTimeoutRefuseAndAreCounted) {
  const ScratchDir scratch("ig_queue_policy_");
  const std::filesystem::path repo = scratch.path();
  WriteMatrixProductModel(repo / "capped", 64, "default_queue_policy { max_queue_size: 1 }\n");
  WriteMatrixProductModel(repo / "timed", 64,
                          "default_queue_policy { default_timeout_microseconds: 100000 timeout_action: REJECT }\n");
  auto server = ServerProcess::Start({"--model-repository=" + repo.string(), "--cpu-workers=1", "--devices=cpu"});
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  auto call = [&](const std::string& model, std::string* message = nullptr) {
    auto stub = v1::InferenceService::NewStub(channel);
    v1::InferRequest req;
    req.set_model(model);
    *req.add_inputs() = ToWire(at::ones({4}), "x");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
    v1::InferResponse resp;
    grpc::Status s = stub->Infer(&ctx, req, &resp);
    if (message) *message = s.error_message();
    return s.error_code();
  };
  const std::string oldest = "infergate_device_oldest_running_batch_seconds{device=\"cpu\"}";
  EXPECT_EQ(MetricValue(ScrapeMetrics(*server), oldest), 0.0) << "idle";

  // capped: one running, one waiting, the third refused.
  std::atomic<int> running_code{-1}, waiting_code{-1};
  std::thread running([&] { running_code = call("capped"); });
  EXPECT_NE(ScrapeUntil(*server, [&](const std::string& m) { return MetricValue(m, oldest) > 0; }), "")
      << "the running call never showed in " << oldest;
  std::thread waiting([&] { waiting_code = call("capped"); });
  const std::string depth = "infergate_model_queue_depth{device=\"cpu\",model=\"capped\",version=\"1\"}";
  const std::string queued = ScrapeUntil(*server, [&](const std::string& m) { return MetricValue(m, depth) == 1; });
  ASSERT_NE(queued, "") << "the waiting call never showed as " << depth << " 1";
  EXPECT_GT(MetricValue(queued, oldest), 0.0) << "a batch runs while another waits";
  std::string message;
  EXPECT_EQ(call("capped", &message), grpc::StatusCode::RESOURCE_EXHAUSTED) << message;
  EXPECT_NE(message.find("capped"), std::string::npos) << "the refusal names the model: " << message;
  running.join();
  waiting.join();
  EXPECT_EQ(running_code.load(), grpc::StatusCode::OK);
  EXPECT_EQ(waiting_code.load(), grpc::StatusCode::OK) << "the call within max_queue_size was answered";

  // timed: a call waiting longer than 100 ms behind a running one.
  std::thread timed_running([&] { running_code = call("timed"); });
  EXPECT_NE(ScrapeUntil(*server, [&](const std::string& m) { return MetricValue(m, oldest) > 0; }), "");
  EXPECT_EQ(call("timed", &message), grpc::StatusCode::UNAVAILABLE) << message;
  EXPECT_NE(message.find("queue timeout"), std::string::npos) << message;
  timed_running.join();
  EXPECT_EQ(running_code.load(), grpc::StatusCode::OK);

  const std::string after = ScrapeMetrics(*server);
  EXPECT_EQ(MetricValue(after, "infergate_rejections_total{model=\"capped\",reason=\"model_queue_full\"}"), 1.0)
      << after;
  EXPECT_EQ(MetricValue(after, "infergate_rejections_total{model=\"timed\",reason=\"queue_timeout\"}"), 1.0) << after;
  EXPECT_EQ(MetricValue(after, oldest), 0.0) << "idle again";
  EXPECT_TRUE(std::isnan(MetricValue(after, depth))) << "versions with nothing waiting are left out";
  EXPECT_EQ(server->Stop(), 0);
}

// Which of two waiting calls to a model with priority levels ran first on a
// server with one CPU worker and `--priority-aging=<aging>`: a level-3
// call queued behind a running one, then a level-1 call queued behind both.
// Returns "low" or "high" ("" when a call failed or the queue never showed
// them waiting).
std::string FirstOfTwoPriorities(const std::string& aging) {
  const ScratchDir scratch("ig_priority_");
  const std::filesystem::path repo = scratch.path();
  WriteSizedMatrixProductModel(repo / "ranked", "priority_levels: 3\ndefault_priority_level: 2\n");
  auto server = ServerProcess::Start(
      {"--model-repository=" + repo.string(), "--cpu-workers=1", "--devices=cpu", "--priority-aging=" + aging});
  EXPECT_NE(server, nullptr);
  if (!server) return "";
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  std::mutex mu;
  std::vector<std::string> finished;  // in the order the calls ended
  bool all_ok = true;
  // `products`: the call's length (the running one long, the waiting ones
  // short: only their order is looked at).
  auto call = [&](uint32_t priority, const std::string& label, int64_t products) {
    auto stub = v1::InferenceService::NewStub(channel);
    v1::InferRequest req;
    req.set_model("ranked");
    req.set_priority(priority);
    *req.add_inputs() = ToWire(at::ones({products}), "x");
    grpc::ClientContext ctx;
    v1::InferResponse resp;
    const bool ok = stub->Infer(&ctx, req, &resp).ok();
    std::lock_guard<std::mutex> lock(mu);
    all_ok = all_ok && ok;
    finished.push_back(label);
  };
  const std::string depth = "infergate_model_queue_depth{device=\"cpu\",model=\"ranked\",version=\"1\"}";
  // Loaded first, so the running call below is a run: a call queued behind
  // the load would be counted as waiting. (The running call's 64 products,
  // about three seconds here: long enough for the scrapes below to see both
  // calls wait, sanitizers and a loaded machine included.)
  call(1, "load", 1);
  finished.clear();
  std::vector<std::thread> calls;
  calls.emplace_back(call, 1, "running", 64);
  bool queued = !ScrapeUntil(*server, [](const std::string& m) {
                   return MetricValue(m, "infergate_device_oldest_running_batch_seconds{device=\"cpu\"}") > 0;
                 }).empty();
  calls.emplace_back(call, 3, "low", 1);
  queued = queued && !ScrapeUntil(*server, [&](const std::string& m) { return MetricValue(m, depth) == 1; }).empty();
  calls.emplace_back(call, 1, "high", 1);
  queued = queued && !ScrapeUntil(*server, [&](const std::string& m) { return MetricValue(m, depth) == 2; }).empty();
  for (auto& t : calls) t.join();
  EXPECT_EQ(server->Stop(), 0);
  EXPECT_TRUE(queued) << "the calls were not seen waiting together";
  EXPECT_TRUE(all_ok);
  if (!queued || !all_ok || finished.size() != 3 || finished[0] != "running") return "";
  return finished[1];
}

// --priority-aging through the real server: without aging the level-1 call
// overtakes the level-3 one that waited longer; aged by a millisecond per
// level, the level-3 call, queued at least two milliseconds earlier (the
// test waits to see it queued before it sends the other), outranks it.
TEST(QueuePolicy, PriorityAgingLetsAWaitingLowPriorityCallOutrankFreshWork) {
  EXPECT_EQ(FirstOfTwoPriorities("0"), "high");
  EXPECT_EQ(FirstOfTwoPriorities("1ms"), "low");
}

class StressTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override { return {"--simulate-devices=mps,cuda:0"}; }
};

// Many clients, mixed models and devices, a few thousand requests: every
// answer is the right one for its own input.
TEST_F(StressTest, MixedModelsAndDevicesGiveZeroWrongAnswers) {
  constexpr int kThreads = 16, kEach = 150;
  const char* devices[] = {"", "cpu", "mps", "cuda:0", "cuda"};
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto stub = v1::InferenceService::NewStub(channel_);
      for (int k = 0; k < kEach; ++k) {
        int pick = (t * kEach + k) % 4;
        std::string model;
        std::vector<std::pair<std::string, at::Tensor>> in;
        switch (pick) {
          case 0:
            model = "mlp";
            in = {{"x", at::randn({1 + k % 3, 256})}};
            break;
          case 1:
            model = "cnn";
            in = {{"image", at::randn({1, 3, 64, 64})}};
            break;
          case 2:
            model = "embed";
            in = {{"ids", at::randint(0, 100, {2, 8}, at::TensorOptions().dtype(at::kLong))}};
            break;
          default:
            model = "poly64";
            in = {{"x", at::randn({2, 4}, at::TensorOptions().dtype(at::kDouble))}};
            break;
        }
        v1::InferRequest req = Request(model, in);
        req.set_device(devices[(t + k) % 5]);
        grpc::ClientContext ctx;
        v1::InferResponse resp;
        if (!stub->Infer(&ctx, req, &resp).ok()) {
          failed++;
          continue;
        }
        at::Tensor expected = Reference(model, {in[0].second});
        at::Tensor got = FromWire(resp.outputs(0));
        // 16-bit compute on simulated accelerators is compared loosely, but
        // a swapped answer is off by far more than that.
        bool half = resp.placement().dtype() == v1::FLOAT16 || resp.placement().dtype() == v1::BFLOAT16;
        double tol = half ? 0.1 : 1e-4;
        if (got.sizes() != expected.sizes() || !at::allclose(got, expected.to(got.scalar_type()), tol, tol)) wrong++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace infergate::testing
