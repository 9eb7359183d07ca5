// What the README promises about flags, metrics and tokens, each shown on
// the real server.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "devices/system_info.h"
#include "tests/common/build_paths.h"
#include "tests/common/scratch_dir.h"
#include "tests/integration/rest_connection.h"
#include "tests/integration/server_fixture.h"

namespace infergate::testing {
namespace {

v1::InferRequest SlowRequest() {
  v1::InferRequest req;
  req.set_model("slow");
  *req.add_inputs() = ToWire(at::ones({4}), "x");
  return req;
}

// Draining: readiness NOT_SERVING, liveness still SERVING (so Kubernetes
// does not restart a pod that is finishing its work); and --drain-timeout
// bounds the drain: with several seconds of queued work and a 300 ms
// timeout the process ends long before the work would have, and the queued
// calls are answered without running, over gRPC (whose shutdown would
// cancel them anyway) and over REST (which nothing else cancels). (Drain.*
// in scheduling_test checks the probes again well into a longer drain.)
void ExpectTheDrainTimeoutCutsTheQueue(bool rest) {
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--drain-timeout=300ms"});
  ASSERT_NE(server, nullptr);
  using Status = grpc::health::v1::HealthCheckResponse;
  auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  // One slow call alone, timed: what a batch takes on this machine now
  // (about a second; several under a sanitizer on a busy machine).
  double slow_call_s = 0;
  {
    grpc::ClientContext ctx;
    v1::InferResponse resp;
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(stub->Infer(&ctx, SlowRequest(), &resp).ok());
    slow_call_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // Sixteen slow calls on two CPU workers: eight slow calls' time of work.
  // Each caller records whether it was answered OK.
  constexpr int kCalls = 16;
  std::vector<std::thread> callers;
  std::atomic<int> answered{0}, ok{0};
  std::mutex mu;
  std::string refusals;  // what the calls not answered OK got
  for (int i = 0; i < kCalls; ++i) {
    callers.emplace_back([&] {
      std::string outcome;
      if (rest) {
        std::string code;
        RunCommand({"/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "60", "-X", "POST",
                    "-d", R"({"inputs":[{"name":"x","shape":[4],"datatype":"FP32","data":[1,1,1,1]}]})",
                    "http://" + server->http_address() + "/v2/models/slow/infer"},
                   &code);
        outcome = code == "200" ? "OK" : "HTTP " + code;
      } else {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        v1::InferResponse resp;
        grpc::Status s = stub->Infer(&ctx, SlowRequest(), &resp);
        outcome = s.ok() ? "OK" : "code " + std::to_string(s.error_code());
      }
      answered++;
      if (outcome == "OK") {
        ok++;
      } else {
        std::lock_guard<std::mutex> lock(mu);
        refusals += outcome + "\n";
      }
    });
  }
  // Every call reached the server (running, queued or answered) before the
  // signal: on a loaded machine the last callers may connect late, and a
  // call that finds the port closed proves nothing about the queue.
  bool running = WaitForDevice(*stub, [&](const v1::DeviceInfo& d) {
    return d.in_flight() > 0 && d.in_flight() + d.queue_depth() + answered.load() >= kCalls;
  });
  ASSERT_TRUE(running) << "the slow calls never all reached the server";
  const int answered_before = answered.load();
  auto start = std::chrono::steady_clock::now();
  kill(server->pid(), SIGTERM);
  // The port stays open through the drain: readiness answers NOT_SERVING,
  // liveness SERVING.
  Status::ServingStatus ready = Status::SERVING;
  for (auto deadline = start + std::chrono::seconds(5);
       ready == Status::SERVING && std::chrono::steady_clock::now() < deadline;) {
    ready = HealthStatus(server->address(), "");
  }
  EXPECT_EQ(ready, Status::NOT_SERVING) << "readiness while draining";
  EXPECT_EQ(HealthStatus(server->address(), "liveness"), Status::SERVING) << "liveness while draining";
  // TorchServe's /ping says so too: 500 Unhealthy while draining.
  const RestAnswer ping = RestConnection(server->http_address()).Call("GET", "/ping");
  EXPECT_EQ(ping.status, 500) << ping.body;
  EXPECT_NE(ping.body.find("Unhealthy"), std::string::npos) << ping.body;
  EXPECT_EQ(server->WaitForExit(), 0) << server->Log();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The drain gives up at 300 ms; then the batches already running finish
  // (one slow call each) and gRPC's shutdown gives replies a second. The
  // bound is that, twice over for a loaded machine, and it stays well under
  // the eight slow calls' time of work that was queued.
  const double bound = 0.3 + 2 * (slow_call_s + 1.0);
  std::cout << "SIGTERM to exit: " << took << " s (one slow call: " << slow_call_s << " s, bound " << bound << " s)\n";
  EXPECT_LT(took, bound) << "the drain outlasted --drain-timeout=300ms by far";
  EXPECT_LT(bound, 8 * slow_call_s) << "the bound no longer tells a cut queue from a drained one";
  EXPECT_NE(server->Log().find("drain timeout passed with work still queued or running"), std::string::npos)
      << server->Log();
  for (auto& t : callers) t.join();
  EXPECT_EQ(answered.load(), kCalls) << "every caller got an answer";
  // Answered OK at most: what had ended before SIGTERM, and on each of the
  // two workers the call running then plus those it could start within the
  // 300 ms (one more per slow call's time, rounded up, and one for luck).
  const int could_run = answered_before + 2 * (2 + static_cast<int>(std::ceil(0.3 / slow_call_s)));
  EXPECT_LE(ok.load(), could_run) << "queued calls ran after the drain timeout:\n" << refusals;
  EXPECT_GE(kCalls - ok.load(), kCalls - could_run) << refusals;
  // The rest: queued calls refused as unavailable (gRPC UNAVAILABLE, HTTP
  // 503), and the batches still running at the timeout, which end after
  // the ports' one-second grace when a slow call takes longer (under a
  // sanitizer): their answers are lost (gRPC CANCELLED, HTTP no answer),
  // one per CPU worker at most. Nothing else.
  int lost = 0;
  for (absl::string_view line : absl::StrSplit(refusals, '\n', absl::SkipEmpty())) {
    if (line == (rest ? "HTTP 000" : "code 1")) {
      ++lost;
    } else {
      EXPECT_EQ(line, rest ? "HTTP 503" : "code 14");
    }
  }
  EXPECT_LE(lost, 2) << "answers lost beyond the two batches that can be running:\n" << refusals;
  EXPECT_NE(server->Log().find("queued request(s) answered UNAVAILABLE without running"), std::string::npos)
      << server->Log();
}

TEST(Promises, DrainTurnsReadinessOffKeepsLivenessAndEndsAtTheDrainTimeout) {
  ExpectTheDrainTimeoutCutsTheQueue(/*rest=*/false);
}

TEST(Promises, DrainTimeoutCutsQueuedRestCallsToo) { ExpectTheDrainTimeoutCutsTheQueue(/*rest=*/true); }

// The operations guide names every metric family the server exports (its
// "Metrics and monitoring" section, each name in backticks): a server with
// a simulated accelerator, background moves, the CPU tensor cache and
// tracing on (to a collector on loopback that is not there; spans are
// dropped), after requests answered and refused.
TEST(Promises, TheOperationsGuideNamesEveryMetricFamily) {
  auto server = ServerProcess::Start(
      {"--model-repository=" + DemoRepository(), "--simulate-devices=cuda:0", "--otlp-endpoint=http://127.0.0.1:9"});
  ASSERT_NE(server, nullptr);
  std::ifstream in(std::filesystem::path(FlagsDocument()).parent_path() / "operations.md");
  ASSERT_TRUE(in) << "docs/operations.md";
  const std::string guide((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  for (const std::string device : {"auto", "cuda:0", "nowhere"}) {  // answered, loaded there, refused
    v1::InferRequest req;
    req.set_model("mlp");
    req.set_device(device);
    *req.add_inputs() = ToWire(at::randn({1, 256}), "x");
    grpc::ClientContext ctx;
    v1::InferResponse resp;
    EXPECT_EQ(stub->Infer(&ctx, req, &resp).ok(), device != "nowhere") << device;
  }
  const std::string scrape = ScrapeMetrics(*server);
  std::set<std::string> families;
  for (const auto line : absl::StrSplit(scrape, '\n')) {
    constexpr absl::string_view kType = "# TYPE ";
    if (!absl::StartsWith(line, kType)) continue;
    families.insert(std::string(line.substr(kType.size(), line.find(' ', kType.size()) - kType.size())));
  }
  EXPECT_GT(families.size(), 30u) << scrape;
  for (const std::string& family : families) {
    EXPECT_TRUE(guide.find("`" + family + "`") != std::string::npos ||
                guide.find("`" + family + "{") != std::string::npos)
        << family << " is exported and docs/operations.md does not name it";
  }
  EXPECT_EQ(server->Stop(), 0);
}

// An empty --metrics-address serves no metrics (no port, no line).
TEST(Promises, EmptyMetricsAddressDisablesMetrics) {
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--metrics-address="});
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->metrics_address().empty());
  EXPECT_EQ(server->Log().find("metrics on"), std::string::npos) << server->Log();
  EXPECT_EQ(server->Stop(), 0);
}

// --log-level drops the lines below it and keeps the rest. At `warning` an
// answered call, a model that throws and a stop write no info or debug
// line, only the warning the throw causes; at `debug` each call also writes
// its debug line. A line's first letter is its level (D, I, W, E).
TEST(Promises, LogLevelKeepsTheLinesAtOrAboveIt) {
  auto levels_in = [](const std::string& log) {
    std::set<char> seen;
    for (const auto line : absl::StrSplit(log, '\n')) {
      if (line.size() > 2 && line[1] == ' ' && std::isdigit(static_cast<unsigned char>(line[2]))) seen.insert(line[0]);
    }
    return seen;
  };
  for (const std::string level : {"warning", "debug"}) {
    auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--log-level=" + level});
    ASSERT_NE(server, nullptr) << level;
    auto stub =
        v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
    for (const float sign : {1.0f, -1.0f}) {  // `fails` throws on a negative input
      v1::InferRequest req;
      req.set_model("fails");
      *req.add_inputs() = ToWire(sign * at::ones({4}), "x");
      grpc::ClientContext ctx;
      v1::InferResponse resp;
      EXPECT_EQ(stub->Infer(&ctx, req, &resp).ok(), sign > 0) << level;
    }
    EXPECT_EQ(server->Stop(), 0) << level;
    const std::string log = server->Log();
    const std::set<char> seen = levels_in(log);
    EXPECT_NE(log.find("inference call for model 'fails' failed"), std::string::npos) << level << "\n" << log;
    if (level == "warning") {
      EXPECT_EQ(seen, std::set<char>{'W'}) << log;
    } else {
      EXPECT_TRUE(seen.count('I') && seen.count('D')) << log;
      EXPECT_NE(log.find("inference call model='fails' device=cpu status=OK"), std::string::npos) << log;
    }
  }
}

class NoRestApiTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override { return {"--http-address="}; }
};

// An empty --http-address serves no REST API (no port, no line); gRPC
// serves as before.
TEST_F(NoRestApiTest, EmptyHttpAddressDisablesTheRestApi) {
  EXPECT_TRUE(server_->http_address().empty());
  EXPECT_EQ(server_->Log().find("REST API on"), std::string::npos) << server_->Log();
  v1::InferResponse resp;
  EXPECT_TRUE(Infer(Request("mlp", {{"x", at::randn({1, 256})}}), &resp).ok());
}

// --max-inflight-bytes defaults to a quarter of the memory (never below
// --max-receive-bytes, so one largest request always fits), and the limit
// is what /metrics reports. The memory is what ReadHostMemory finds, the
// server's own reading (the container's cgroup limit when there is one
// below the host's memory, else MemTotal; its parsing is unit-tested in
// system_info_test).
TEST_F(ServerTest, TheInflightBudgetDefaultsToAQuarterOfTheMemory) {
  const uint64_t memory = ReadHostMemory().total_bytes;
  ASSERT_GT(memory, 0u);
  const double expected = static_cast<double>(std::max<uint64_t>(memory / 4, uint64_t{64} << 20));
  const std::string scrape = ScrapeMetrics(*server_);
  EXPECT_EQ(MetricValue(scrape, "infergate_inflight_request_bytes_limit"), expected) << scrape;
  EXPECT_NE(
      server_->Log().find("in-flight request budget " + std::to_string(static_cast<uint64_t>(expected)) + " bytes"),
      std::string::npos)
      << server_->Log();
}

// --worker-spin-us: an idle worker polls its queue for at most that long
// (200 us by default) and then sleeps. So a server that has just answered a
// burst of calls uses next to no CPU once idle: under a tenth of a core over
// three seconds. (It used none here; one worker that kept polling would
// take a core, or its share of one on a busy machine: several times this.)
TEST_F(ServerTest, AnIdleServerSleeps) {
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      auto stub = v1::InferenceService::NewStub(channel_);
      for (int i = 0; i < 25; ++i) {
        grpc::ClientContext ctx;
        v1::InferResponse resp;
        EXPECT_TRUE(stub->Infer(&ctx, Request("mlp", {{"x", at::randn({1, 256})}}), &resp).ok());
      }
    });
  }
  for (auto& t : clients) t.join();
  auto cpu_seconds = [&] {
    std::ifstream stat("/proc/" + std::to_string(server_->pid()) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    // Fields after the command's closing parenthesis; utime and stime are the 14th and 15th.
    std::vector<std::string> fields = absl::StrSplit(text.substr(text.rfind(')') + 2), ' ');
    if (fields.size() < 13) return -1.0;
    return static_cast<double>(std::stoull(fields[11]) + std::stoull(fields[12])) / sysconf(_SC_CLK_TCK);
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double before = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const double used = cpu_seconds() - before;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_GE(before, 0.0);
  EXPECT_LT(used, 0.1 * wall) << "CPU seconds used in " << wall << " s of idling";
}

class TightLimitsTest : public ServerTest {
 protected:
  std::vector<std::string> ExtraArgs() const override {
    return {"--max-tensor-rank=2", "--max-tensor-elements=1000", "--batching=false"};
  }
};

// Set limits hold, naming the field; --batching=false runs every request alone.
TEST_F(TightLimitsTest, SetLimitsAreEnforcedAndBatchingOffRunsRequestsAlone) {
  v1::InferResponse resp;
  grpc::Status rank = Infer(Request("slow", {{"x", at::ones({1, 1, 4})}}), &resp);
  EXPECT_EQ(rank.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(rank.error_message().find("inputs[0].shape"), std::string::npos) << rank.error_message();
  grpc::Status elements = Infer(Request("mlp", {{"x", at::randn({4, 256})}}), &resp);  // 1024 > 1000
  EXPECT_EQ(elements.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(elements.error_message().find("1000"), std::string::npos) << elements.error_message();
  ASSERT_TRUE(Infer(Request("mlp", {{"x", at::randn({3, 256})}}), &resp).ok());  // 768: within
  std::vector<std::thread> clients;
  std::atomic<int> batched{0}, ok{0};
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&] {
      auto stub = v1::InferenceService::NewStub(channel_);
      for (int i = 0; i < 20; ++i) {
        grpc::ClientContext ctx;
        v1::InferResponse r;
        if (stub->Infer(&ctx, Request("mlp", {{"x", at::randn({1, 256})}}), &r).ok()) {
          ok++;
          if (r.placement().batch_size() != 1) batched++;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 160);
  EXPECT_EQ(batched.load(), 0) << "requests were batched with --batching=false";
}

// The metrics the README lists are there with the values they should have:
// queue capacity, busy time, load durations, and unknown models counted
// under model="" (never a client's string).
TEST_F(ServerTest, ListedMetricsCarryTheirValues) {
  v1::InferResponse resp;
  ASSERT_TRUE(
      Infer(Request("embed", {{"ids", at::randint(0, 100, {1, 8}, at::TensorOptions().dtype(at::kLong))}}), &resp)
          .ok());
  EXPECT_EQ(Infer(Request("no-such-model-xyz", {{"x", at::ones({1})}}), &resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
  const std::string scrape = ScrapeMetrics(*server_);
  EXPECT_NE(scrape.find("infergate_device_queue_capacity{device=\"cpu\"} 1024"), std::string::npos) << scrape;
  // Busy time grew past zero once something ran.
  size_t busy = scrape.find("infergate_device_busy_seconds_total{device=\"cpu\"");
  ASSERT_NE(busy, std::string::npos) << scrape;
  double busy_seconds = std::stod(scrape.substr(scrape.find("} ", busy) + 2));
  EXPECT_GT(busy_seconds, 0.0);
  // embed was loaded on demand: one load observed on the CPU.
  EXPECT_NE(scrape.find("infergate_model_load_duration_seconds_count{device=\"cpu\"}"), std::string::npos) << scrape;
  EXPECT_NE(scrape.find("model=\"\""), std::string::npos) << "the unknown model is counted under model=\"\"";
  EXPECT_EQ(scrape.find("no-such-model-xyz"), std::string::npos) << "a client's model name became a label";
  // Under ASan the server keeps LibTorch's own allocator: no cache to hit.
  if (MemoryBoundsApply()) {
    // cnn's activations are blocks of 64 KiB and more: its second call reuses
    // the blocks its first call freed.
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(Infer(Request("cnn", {{"image", at::randn({1, 3, 64, 64})}}), &resp).ok());
    }
    const std::string after = ScrapeMetrics(*server_);
    size_t hits = after.find("\ninfergate_cpu_tensor_cache_hits_total ");
    ASSERT_NE(hits, std::string::npos) << after;
    EXPECT_GT(std::stod(after.substr(hits + std::string("\ninfergate_cpu_tensor_cache_hits_total ").size())), 0.0);
    EXPECT_NE(after.find("\ninfergate_cpu_tensor_cache_bytes "), std::string::npos) << after;
    EXPECT_NE(after.find("\ninfergate_cpu_tensor_cache_misses_total "), std::string::npos) << after;
  }
}

// The allocator the build linked is the one serving the process's memory
// (cmake/allocator.cmake: jemalloc, the system's under a sanitizer), as
// the build_info metric says: a link that left glibc's malloc in place
// would only show as a slower server.
TEST_F(ServerTest, BuildInfoNamesTheAllocatorTheBuildLinked) {
  const std::string scrape = ScrapeMetrics(*server_);
  const size_t at = scrape.find("\ninfergate_build_info{");
  ASSERT_NE(at, std::string::npos) << scrape;
  const std::string line = scrape.substr(at + 1, scrape.find('\n', at + 1) - at - 1);
  const std::string expected = INFERGATE_EXPECTED_ALLOCATOR;
  const std::string label = expected == "jemalloc" ? "allocator=\"jemalloc " : "allocator=\"system\"";
  EXPECT_NE(line.find(label), std::string::npos) << "expected " << label << " in " << line;
}

// Tokens guard ListModels and UnloadModel too; the CLI's --token and TLS
// flags reach a server that needs them.
TEST(Promises, TokensGuardListModelsAndTheCliCarriesTokenAndTls) {
  const ScratchDir scratch("ig_promises_");
  const std::string& dir = scratch.path();
  std::string out;
  ASSERT_EQ(RunCommand({"/bin/sh", "-c",
                        "set -e; cd " + dir +
                            "; openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=ca -keyout ca.key -out "
                            "ca.pem 2>/dev/null; printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext; "
                            "openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout s.key -out s.csr "
                            "2>/dev/null; openssl x509 -req -in s.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
                            "-extfile san.ext -out s.pem 2>/dev/null; printf 'promise-token-0123456789\\n' > tokens; "
                            "printf 'promise-admin-0123456789\\n' > admin"},
                       &out),
            0)
      << out;
  auto server = ServerProcess::Start(
      {"--model-repository=" + DemoRepository(), "--auth-token-file=" + dir + "/tokens",
       "--admin-token-file=" + dir + "/admin", "--tls-cert=" + dir + "/s.pem", "--tls-key=" + dir + "/s.key"},
      std::chrono::seconds(120), dir + "/ca.pem");
  ASSERT_NE(server, nullptr);
  const std::vector<std::string> tls = {"--tls-ca", dir + "/ca.pem"};
  auto cli = [&](std::vector<std::string> extra, const std::string& command, std::string* output) {
    std::vector<std::string> argv = {InfergateCliBinary(), "--address", server->address()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(command);
    return RunCommand(argv, output);
  };
  std::vector<std::string> with_token = tls;
  with_token.insert(with_token.end(), {"--token", "promise-token-0123456789"});
  EXPECT_NE(cli(tls, "models", &out), 0) << "ListModels without a token: " << out;
  EXPECT_EQ(cli(with_token, "models", &out), 0) << out;
  EXPECT_NE(out.find("mlp"), std::string::npos) << out;
  EXPECT_NE(cli({"--token", "promise-token-0123456789"}, "models", &out), 0) << "plaintext to a TLS port: " << out;
  // UnloadModel: refused without a token and with an inference token, done with the admin token.
  auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), [&] {
    grpc::SslCredentialsOptions ssl;
    std::ifstream in(dir + "/ca.pem");
    ssl.pem_root_certs.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return grpc::SslCredentials(ssl);
  }()));
  for (auto [token, code] : std::vector<std::pair<std::string, grpc::StatusCode>>{
           {"", grpc::StatusCode::UNAUTHENTICATED},
           {"promise-token-0123456789", grpc::StatusCode::PERMISSION_DENIED},
           {"promise-admin-0123456789", grpc::StatusCode::OK}}) {
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    v1::UnloadModelRequest unload;
    unload.set_model("mlp");
    v1::UnloadModelResponse resp;
    EXPECT_EQ(stub->UnloadModel(&ctx, unload, &resp).error_code(), code) << token;
  }
  stub.reset();
  EXPECT_EQ(server->Stop(), 0);
}

}  // namespace
}  // namespace infergate::testing

namespace infergate::testing {
namespace {

// A repository of mlp copies whose configs differ only in what is tested:
// a precision override, an allow-list of device kinds, and pinning.
class ConfigAppliedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    namespace fs = std::filesystem;
    char pattern[] = "/tmp/ig_config_XXXXXX";
    repo_ = mkdtemp(pattern);
    const std::string base = "max_batch_size: 64\ninputs { name: \"x\" dtype: FLOAT32 dims: [256] }\n";
    auto copy = [&](const std::string& name, const std::string& extra) {
      fs::create_directories(repo_ + "/" + name + "/1");
      fs::copy_file(DemoRepository() + "/mlp/1/model.pt", repo_ + "/" + name + "/1/model.pt");
      std::ofstream(repo_ + "/" + name + "/config.pbtxt") << base << extra;
    };
    copy("half", "precision: FP16\n");
    copy("cpu_only", "allowed_devices: [CPU]\n");
    copy("pinned", "pinned: true\n");
    copy("plain", "");
    // A cuda:0 budget that holds one mlp copy (about 1.6 MB in FP32) but not two.
    server_ = ServerProcess::Start(
        {"--model-repository=" + repo_, "--simulate-devices=cuda:0", "--cache-budget=cuda:0=2500KiB"});
    ASSERT_NE(server_, nullptr);
    stub_ = v1::InferenceService::NewStub(grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    stub_.reset();
    if (server_) {
      EXPECT_EQ(server_->Stop(), 0);
    }
    std::filesystem::remove_all(repo_);
  }
  grpc::Status Infer(const std::string& model, const std::string& device, v1::InferResponse* resp,
                     v1::FallbackPolicy fallback = v1::ALLOW, v1::Precision precision = v1::AUTO) {
    v1::InferRequest req;
    req.set_model(model);
    req.set_device(device);
    req.set_fallback(fallback);
    req.set_precision(precision);
    *req.add_inputs() = ToWire(at::randn({1, 256}), "x");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub_->Infer(&ctx, req, resp);
  }
  std::vector<std::string> LoadedOn(const std::string& model) {
    grpc::ClientContext ctx;
    v1::ListModelsResponse models;
    EXPECT_TRUE(stub_->ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
    std::vector<std::string> devices;
    for (const auto& m : models.models()) {
      if (m.name() != model) continue;
      for (const auto& l : m.loaded()) devices.push_back(l.device());
    }
    return devices;
  }
  std::string repo_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::InferenceService::Stub> stub_;
};

TEST_F(ConfigAppliedTest, PrecisionOverrideAllowedDevicesAndPinningAreApplied) {
  v1::InferResponse resp;
  // precision: FP16 overrides the CPU's FP32 default, once its accuracy
  // check passed (FP32 serves meanwhile, and says why).
  ASSERT_TRUE(Infer("half", "cpu", &resp).ok());
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       resp.placement().precision_reason() == "unverified:float16" && std::chrono::steady_clock::now() < deadline;) {
    EXPECT_EQ(resp.placement().dtype(), v1::FLOAT32);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(Infer("half", "cpu", &resp).ok());
  }
  EXPECT_EQ(resp.placement().dtype(), v1::FLOAT16);
  EXPECT_EQ(resp.placement().precision_reason(), "");
  ASSERT_TRUE(Infer("plain", "cpu", &resp).ok());
  EXPECT_EQ(resp.placement().dtype(), v1::FLOAT32);
  // allowed_devices: [CPU]: asked for cuda:0, it runs on the CPU and says why;
  // with DENY it is refused naming the device.
  ASSERT_TRUE(Infer("cpu_only", "cuda:0", &resp).ok());
  EXPECT_EQ(resp.placement().device(), "cpu");
  EXPECT_TRUE(resp.placement().fell_back());
  EXPECT_EQ(resp.placement().fallback_reason(), "device_not_allowed:cuda:0");
  grpc::Status denied = Infer("cpu_only", "cuda:0", &resp, v1::DENY);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(denied.error_message().find("cuda:0"), std::string::npos) << denied.error_message();
  ASSERT_TRUE(Infer("cpu_only", "", &resp).ok());
  EXPECT_EQ(resp.placement().device(), "cpu") << "auto must not place a CPU-only model on cuda:0";
  // pinned: true is never evicted. With room for one copy on cuda:0: loading
  // the pinned model evicts the unpinned one, and the unpinned one cannot
  // come back while the pinned one holds the budget: it is refused before
  // it loads (RESOURCE_EXHAUSTED with DENY); with ALLOW it is answered from
  // the CPU copy it got when it was evicted (demoted, --background-moves).
  auto on_cuda = [&](const std::string& model) {
    std::vector<std::string> devices = LoadedOn(model);
    return std::find(devices.begin(), devices.end(), "cuda:0") != devices.end();
  };
  ASSERT_TRUE(Infer("plain", "cuda:0", &resp, v1::DENY, v1::FP32).ok());
  ASSERT_TRUE(on_cuda("plain"));
  ASSERT_TRUE(Infer("pinned", "cuda:0", &resp, v1::DENY, v1::FP32).ok());
  EXPECT_TRUE(on_cuda("pinned"));
  EXPECT_FALSE(on_cuda("plain")) << "over the budget, the idle unpinned model should have been evicted";
  grpc::Status no_room = Infer("plain", "cuda:0", &resp, v1::DENY, v1::FP32);
  EXPECT_EQ(no_room.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << no_room.error_message();
  EXPECT_NE(no_room.error_message().find("pinned or loading hold"), std::string::npos) << no_room.error_message();
  ASSERT_TRUE(Infer("plain", "cuda:0", &resp, v1::ALLOW, v1::FP32).ok());
  EXPECT_EQ(resp.placement().device(), "cpu");
  EXPECT_EQ(resp.placement().fallback_reason(), "demoted:cuda:0");
  EXPECT_TRUE(on_cuda("pinned")) << "the pinned model was evicted";
  EXPECT_FALSE(on_cuda("plain"));
}

}  // namespace
}  // namespace infergate::testing
