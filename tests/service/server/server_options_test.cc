#include "service/server/server_options.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tests/common/build_paths.h"

namespace infergate {
namespace {

// Every flag, its default as --help prints it, and as the flags table of
// docs/configuration.md writes it: the one table the help, that page and
// the parsed defaults are all checked against.
struct DocumentedFlag {
  const char* flag;
  const char* help_default;
  const char* readme_default;
};
// clang-format off: a table, one row a line
constexpr DocumentedFlag kFlags[] = {
    {"--address", "\"0.0.0.0:50051\"", "`0.0.0.0:50051`"},
    {"--model-repository", "\"./models\"", "`./models`"},
    {"--mar-max-bytes", "17179869184", "16GiB"},
    {"--torchserve-addresses", "false", "false"},
    {"--torchserve-metrics", "false", "false"},
    {"--repository-poll-interval", "5000ms", "5s"},
    {"--model-control-mode", "\"\"", "unset"},
    {"--load-model", "\"\"", "none"},
    {"--max-receive-bytes", "67108864", "64MiB"},
    {"--max-inflight-bytes", "0", "a quarter of the memory"},
    {"--max-load-file-bytes", "0", "0 (off)"},
    {"--allow-native-uploads", "false", "false"},
    {"--cpu-tensor-cache", "268435456", "256MiB"},
    {"--cpu-workers", "0", "auto"},
    {"--accelerator-workers", "1", "1"},
    {"--intra-op-threads", "0", "auto"},
    {"--queue-capacity", "1024", "1024"},
    {"--max-tensor-rank", "8", "8 / 2^28"},
    {"--max-tensor-elements", "268435456", "8 / 2^28"},
    {"--max-string-elements", "1048576", "1048576"},
    {"--min-receive-rate", "1048576", "1MiB"},
    {"--max-reads-per-address", "64", "64"},
    {"--drain-timeout", "30000ms", "30s"},
    {"--stuck-batch-timeout", "300000ms", "5m"},
    {"--batching", "true", "true"},
    {"--fair-queueing", "true", "true"},
    {"--background-moves", "true", "true"},
    {"--host-copy-share", "0.5", "0.5"},
    {"--load-and-run-displaces", "false", "false"},
    {"--load-and-run", "true", "true"},
    {"--load-on-arrival", "true", "true"},
    {"--load-and-run-reserves", "true", "true"},
    {"--staging-share", "0.5", "0.5"},
    {"--staging-demand-window", "2000ms", "2s"},
    {"--move-window", "10000ms", "10s"},
    {"--move-hysteresis", "1.5", "1.5"},
    {"--move-objective", "\"tail\"", "tail"},
    {"--move-min-residence", "5000ms", "5s"},
    {"--demand-window", "10000ms", "10s"},
    {"--demand-change-threshold", "5", "5"},
    {"--move-period", "1000ms", "1s"},
    {"--precision-checks", "true", "true"},
    {"--priority-aging", "100ms", "100ms"},
    {"--worker-spin-us", "200", "200"},
    {"--cache-budget", "\"\"", "80% of each device's memory"},
    {"--metrics-address", "\"0.0.0.0:9464\"", "`0.0.0.0:9464`"},
    {"--http-address", "\"0.0.0.0:8000\"", "`0.0.0.0:8000`"},
    {"--http-threads", "2", "2"},
    {"--http-request-timeout", "30000ms", "30s"},
    {"--http-max-connections", "1024", "1024"},
    {"--tls-cert", "\"\"", "none"},
    {"--tls-key", "\"\"", "none"},
    {"--tls-client-ca", "\"\"", "none"},
    {"--auth-token-file", "\"\"", "none"},
    {"--admin-token-file", "\"\"", "none"},
    {"--disable-admin", "false", "false"},
    {"--open-admin-api", "false", "false"},
    {"--http-host-name", "none", "none"},
    {"--reflection", "\"auto\"", "auto"},
    {"--max-concurrent-streams", "256", "256"},
    {"--grpc-bdp-probe", "false", "false"},
    {"--grpc-infer-threads", "2", "2"},
    {"--io-thread-policy", "\"batch\"", "batch"},
    {"--max-connection-age", "0ms", "0 (never)"},
    {"--max-connection-idle", "300000ms", "5m"},
    {"--grpc-handshake-timeout", "10000ms", "10s"},
    {"--state-file", "\"\"", "none"},
    {"--modelmesh-address", "\"\"", "none"},
    {"--modelmesh-model-root", "\"\"", "none"},
    {"--modelmesh-load-timeout", "120000ms", "2m"},
    {"--modelmesh-default-model-size", "268435456", "256MiB"},
    {"--log-level", "\"info\"", "`info`"},
    {"--otlp-endpoint", "\"\"", "none (tracing off)"},
    {"--otlp-protocol", "\"\"", "`grpc`"},
    {"--trace-sampler", "\"\"", "`parentbased_always_on`"},
    {"--trace-sampler-arg", "\"\"", "1"},
    {"--service-name", "\"\"", "`infergate`"},
    {"--resource-attributes", "\"\"", "none"},
    {"--trace-queue-size", "0", "2048"},
    {"--trace-export-delay", "0ms", "5s"},
    {"--devices", "\"\"", "all"},
    {"--simulate-devices", "\"\"", "none"},
    {"--simulate-mps-unsupported-ops", "\"\"", "a few ops real MPS lacked"},
    {"--simulate-failing-devices", "\"\"", "none / 0"},
    {"--simulate-failures-after", "0", "none / 0"},
    {"--simulate-cpu-slowdown", "1", "1"},
    {"--device-failure-cooldown", "30000ms", "30s"},
    {"--nvml-library", "\"libnvidia-ml.so.1\"", "`libnvidia-ml.so.1`"},
};
// clang-format on

std::string Help() {
  const char* argv[] = {"infergate", "--help"};
  std::string help;
  EXPECT_TRUE(ParseServerOptions(2, argv, &help).ok());
  return help;
}

// The flags --help lists, in order.
std::vector<std::string> HelpFlags(const std::string& help) {
  std::vector<std::string> flags;
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);) {
    size_t at = line.find("  --");
    size_t end = line.find(" (default: ");
    if (at == 0 && end != std::string::npos) flags.push_back(line.substr(2, end - 2));
  }
  return flags;
}

// The flags table of docs/configuration.md: each row's flags (a row may
// hold two, "a / b") and its default cell.
std::map<std::string, std::string> ReadmeFlags() {
  std::ifstream in(testing::FlagsDocument());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t start = text.find("## Server flags");
  size_t end = text.find("\n## ", start + 1);
  EXPECT_NE(start, std::string::npos) << "docs/configuration.md has no Server flags section";
  std::map<std::string, std::string> out;
  std::istringstream table(text.substr(start, end - start));
  for (std::string line; std::getline(table, line);) {
    if (line.rfind("| `--", 0) != 0) continue;
    size_t bar1 = line.find('|', 1), bar2 = line.find('|', bar1 + 1);
    std::string flags = line.substr(1, bar1 - 1), def = line.substr(bar1 + 1, bar2 - bar1 - 1);
    def = def.substr(def.find_first_not_of(' '));
    def = def.substr(0, def.find_last_not_of(' ') + 1);
    for (size_t at = flags.find("`--"); at != std::string::npos; at = flags.find("`--", at + 1)) {
      out[flags.substr(at + 1, flags.find('`', at + 1) - at - 1)] = def;
    }
  }
  return out;
}

TEST(ServerOptions, DefaultsMatchTheDocs) {
  const std::string help = Help();
  const std::map<std::string, std::string> readme = ReadmeFlags();
  for (const DocumentedFlag& f : kFlags) {
    EXPECT_NE(help.find(std::string("  ") + f.flag + " (default: " + f.help_default + ")"), std::string::npos)
        << f.flag << " should default to " << f.help_default << " in --help";
    auto row = readme.find(f.flag);
    ASSERT_NE(row, readme.end()) << f.flag << " is missing from the flags table of docs/configuration.md";
    EXPECT_EQ(row->second, f.readme_default) << f.flag << "'s default in docs/configuration.md";
  }
  // And the parsed options hold those defaults.
  const char* argv[] = {"infergate"};
  std::string none;
  absl::StatusOr<ServerOptions> o = ParseServerOptions(1, argv, &none);
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(o->address, "0.0.0.0:50051");
  EXPECT_EQ(o->model_repository, "./models");
  EXPECT_EQ(o->max_receive_bytes, 64u << 20);
  EXPECT_EQ(o->max_inflight_bytes, 0u);
  EXPECT_EQ(o->cpu_tensor_cache_bytes, 256u << 20);
  EXPECT_EQ(o->tensor_limits.max_rank, 8);
  EXPECT_EQ(o->tensor_limits.max_elements, int64_t{1} << 28);
  EXPECT_EQ(o->drain_timeout, std::chrono::seconds(30));
  EXPECT_EQ(o->stuck_batch_timeout, std::chrono::minutes(5));
  EXPECT_EQ(o->metrics_address, "0.0.0.0:9464");
  EXPECT_EQ(o->http_address, "0.0.0.0:8000");
  EXPECT_EQ(o->http_threads, 2);
  EXPECT_EQ(o->http_request_timeout, std::chrono::seconds(30));
  EXPECT_EQ(o->http_max_connections, 1024);
  EXPECT_EQ(o->reflection, ServerOptions::Reflection::kAuto);
  EXPECT_EQ(o->max_concurrent_streams, 256);
  EXPECT_EQ(o->grpc_infer_threads, 2);
  EXPECT_EQ(o->max_connection_age.count(), 0);
  EXPECT_FALSE(o->disable_admin);
  EXPECT_EQ(o->log_level, "info");
  EXPECT_EQ(o->scheduler.queue_capacity, 1024u);
  EXPECT_TRUE(o->scheduler.batching);
  EXPECT_TRUE(o->scheduler.fair_queueing);
  EXPECT_TRUE(o->scheduler.background_moves);
  EXPECT_EQ(o->scheduler.priority_aging, std::chrono::milliseconds(100));
  EXPECT_EQ(o->scheduler.worker_spin_us, 200);
  EXPECT_EQ(o->scheduler.device_failure_cooldown, std::chrono::seconds(30));
  EXPECT_EQ(o->discovery.nvml_library, "libnvidia-ml.so.1");
}

// --help, the table of docs/configuration.md and kFlags list the same flags.
TEST(ServerOptions, HelpListsEveryFlag) {
  const std::vector<std::string> help = HelpFlags(Help());
  std::set<std::string> documented;
  for (const DocumentedFlag& f : kFlags) documented.insert(f.flag);
  std::set<std::string> listed(help.begin(), help.end());
  EXPECT_EQ(listed, documented) << "a flag was added or removed without its row in kFlags";
  std::set<std::string> readme;
  for (const auto& [flag, def] : ReadmeFlags()) readme.insert(flag);
  EXPECT_EQ(readme, documented) << "the flags table of docs/configuration.md and --help list different flags";
}

TEST(ServerOptions, RejectsNonsense) {
  std::string help;
  const char* bad_bytes[] = {"infergate", "--max-receive-bytes=10"};
  EXPECT_FALSE(ParseServerOptions(2, bad_bytes, &help).ok());
  const char* stray[] = {"infergate", "models"};
  EXPECT_FALSE(ParseServerOptions(2, stray, &help).ok());
  const char* level[] = {"infergate", "--log-level=loud"};
  EXPECT_FALSE(ParseServerOptions(2, level, &help).ok());
}

TEST(ServerOptions, DurationsSizesAndDeviceListsAreParsedOnceIntoTypedFields) {
  const char* argv[] = {"infergate",
                        "--drain-timeout=500ms",
                        "--max-connection-age=5m",
                        "--max-receive-bytes=1MiB",
                        "--cache-budget=cpu=1GiB",
                        "--device-failure-cooldown=2s",
                        "--simulate-devices=cuda:0=2GiB",
                        "--simulate-failing-devices=cuda:0",
                        "--max-tensor-rank=4",
                        "--move-objective=mean"};
  std::string help;
  auto o = ParseServerOptions(10, argv, &help);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->drain_timeout.count(), 500);
  EXPECT_EQ(o->max_connection_age.count(), 300000);
  EXPECT_EQ(o->max_receive_bytes, uint64_t{1} << 20);
  EXPECT_EQ(o->scheduler.cache_budgets.at(DeviceId{DeviceKind::kCpu, 0}), uint64_t{1} << 30);
  EXPECT_EQ(o->scheduler.device_failure_cooldown.count(), 2000);
  ASSERT_EQ(o->discovery.simulated.size(), 1u);
  ASSERT_EQ(o->discovery.failing.size(), 1u);
  EXPECT_EQ(o->tensor_limits.max_rank, 4);
  EXPECT_EQ(o->scheduler.placement.objective, MoveObjective::kMean);
  const char* tail_set[] = {"infergate", "--move-objective=tail-set"};
  auto t = ParseServerOptions(2, tail_set, &help);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->scheduler.placement.objective, MoveObjective::kTailSet);
}

TEST(ServerOptions, BadValuesNameTheirFlag) {
  for (const char* bad : {"--drain-timeout=soon",
                          "--max-connection-age=-1s",
                          "--grpc-handshake-timeout=0s",
                          "--max-connection-idle=30d",
                          "--max-receive-bytes=lots",
                          "--cache-budget=cpu",
                          "--simulate-failing-devices=cuda:0",
                          "--devices=tpu",
                          "--queue-capacity=0",
                          "--max-tensor-elements=2305843009213693952",
                          "--grpc-infer-threads=0",
                          "--grpc-infer-threads=65",
                          "--move-objective=median",
                          "--cpu-workers=257",
                          "--move-window=99ms",
                          "--http-threads=0",
                          "--min-receive-rate=1000",
                          "--modelmesh-load-timeout=0s",
                          "--move-hysteresis=nan",
                          "--demand-window=50ms",
                          "--staging-share=1",
                          "--demand-change-threshold=0.5",
                          "--max-string-elements=0"}) {
    const char* argv[] = {"infergate", bad};
    std::string help;
    auto o = ParseServerOptions(2, argv, &help);
    ASSERT_FALSE(o.ok()) << bad;
    std::string flag(bad, std::string(bad).find('='));
    EXPECT_NE(o.status().message().find(flag), absl::string_view::npos) << bad << ": " << o.status();
  }
}

}  // namespace
}  // namespace infergate

namespace infergate {
namespace {

// The ModelMesh interface loads code without a token: on TCP it needs a
// model root; on a unix: socket the file's permissions are the guard.
TEST(ServerOptions, ModelMeshOnTcpNeedsAModelRoot) {
  std::string help;
  const char* bare[] = {"infergate", "--modelmesh-address=127.0.0.1:8085"};
  auto refused = ParseServerOptions(2, bare, &help);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--modelmesh-model-root: required"), std::string::npos) << refused.status();
  const char* rooted[] = {"infergate", "--modelmesh-address=127.0.0.1:8085", "--modelmesh-model-root=/models"};
  EXPECT_TRUE(ParseServerOptions(3, rooted, &help).ok());
  const char* socket[] = {"infergate", "--modelmesh-address=unix:/run/infergate/mesh.sock"};
  EXPECT_TRUE(ParseServerOptions(2, socket, &help).ok());
  // Beyond loopback it is refused, root or not.
  for (const char* open : {"--modelmesh-address=0.0.0.0:8085", "--modelmesh-address=[::]:8085"}) {
    const char* args[] = {"infergate", open, "--modelmesh-model-root=/models"};
    auto beyond = ParseServerOptions(3, args, &help);
    ASSERT_FALSE(beyond.ok()) << open;
    EXPECT_NE(beyond.status().message().find("is reachable beyond this host"), std::string::npos) << beyond.status();
  }
}

TEST(ServerOptions, OnlyLoopbackAddressesCountAsLocal) {
  for (const char* local : {"127.0.0.1:50051", "127.1.2.3:0", "localhost:8000", "[::1]:50051"}) {
    EXPECT_FALSE(ListensBeyondLoopback(local)) << local;
  }
  for (const char* open : {"0.0.0.0:50051", "[::]:50051", "10.0.0.5:50051", "myhost:1", ":50051"}) {
    EXPECT_TRUE(ListensBeyondLoopback(open)) << open;
  }
}

TEST(ServerOptions, TorchServeAddressesReplaceTheFlags) {
  ServerOptions o;
  TorchServeAddresses a;
  a.inference = "http://0.0.0.0:8085";
  a.metrics = "http://127.0.0.1:8082";
  a.grpc_inference_port = 7070;
  ASSERT_TRUE(ApplyTorchServeAddresses(a, o).ok());
  EXPECT_EQ(o.http_address, "0.0.0.0:8085");
  EXPECT_EQ(o.metrics_address, "127.0.0.1:8082");
  EXPECT_EQ(o.address, "0.0.0.0:7070");
  ServerOptions unchanged;
  ASSERT_TRUE(ApplyTorchServeAddresses(TorchServeAddresses{}, unchanged).ok());
  EXPECT_EQ(unchanged.address, ServerOptions{}.address);
  a.inference = "https://0.0.0.0:8443";
  absl::Status tls = ApplyTorchServeAddresses(a, o);
  EXPECT_NE(tls.message().find("inference_address is https: set --tls-cert"), std::string::npos) << tls;
  a.inference = "0.0.0.0:8085";
  EXPECT_NE(ApplyTorchServeAddresses(a, o).message().find("is not http://HOST:PORT"), std::string::npos);
  a.inference = "http://localhost";
  EXPECT_NE(ApplyTorchServeAddresses(a, o).message().find("has no port"), std::string::npos);
}

}  // namespace
}  // namespace infergate

namespace infergate {
namespace {

// Triton's model control modes on the scheduler's options, and what each
// refuses, as one table.
TEST(ServerOptions, ModelControlModesSetPollingAndTheInitialModels) {
  using Mode = SchedulerOptions::ModelControl;
  struct Case {
    std::vector<std::string> args;
    const char* refused;  // null: accepted
    Mode mode;
    int64_t poll_ms;
    std::vector<std::string> initial;
  };
  const Case cases[] = {
      {{}, nullptr, Mode::kFollow, 5000, {}},
      {{"--model-control-mode=none"}, nullptr, Mode::kNone, 0, {}},
      {{"--model-control-mode=poll", "--repository-poll-interval=2s"}, nullptr, Mode::kPoll, 2000, {}},
      {{"--model-control-mode=explicit", "--load-model=mlp, cnn"}, nullptr, Mode::kExplicit, 0, {"mlp", "cnn"}},
      {{"--model-control-mode=explicit", "--load-model=*"}, nullptr, Mode::kExplicit, 0, {"*"}},
      {{"--model-control-mode=explicit"}, nullptr, Mode::kExplicit, 0, {}},
      {{"--model-control-mode=poll", "--repository-poll-interval=0"},
       "--repository-poll-interval must not be 0",
       Mode::kFollow,
       0,
       {}},
      {{"--model-control-mode=sometimes"}, "must be none, poll or explicit", Mode::kFollow, 0, {}},
      {{"--load-model=mlp"}, "--load-model: only with --model-control-mode=explicit", Mode::kFollow, 0, {}},
      {{"--model-control-mode=poll", "--modelmesh-address=unix:/tmp/mesh.sock"},
       "ModelMesh loads and unloads models",
       Mode::kFollow,
       0,
       {}},
  };
  for (const Case& c : cases) {
    std::vector<const char*> argv = {"infergate"};
    for (const std::string& a : c.args) argv.push_back(a.c_str());
    std::string help;
    absl::StatusOr<ServerOptions> o = ParseServerOptions(static_cast<int>(argv.size()), argv.data(), &help);
    SCOPED_TRACE(c.args.empty() ? std::string("(no flags)") : c.args.front());
    if (c.refused != nullptr) {
      ASSERT_FALSE(o.ok());
      EXPECT_NE(o.status().message().find(c.refused), std::string::npos) << o.status();
      continue;
    }
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->scheduler.model_control, c.mode);
    EXPECT_EQ(o->scheduler.repository_poll_interval.count(), c.poll_ms);
    EXPECT_EQ(o->scheduler.initial_models, c.initial);
  }
}

}  // namespace
}  // namespace infergate
