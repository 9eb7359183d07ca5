#include "service/server_options.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

TEST(ServerOptions, DefaultsMatchTheDocs) {
  const char* argv[] = {"infergate"};
  std::string help;
  auto o = ParseServerOptions(1, argv, &help);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->address, "0.0.0.0:50051");
  EXPECT_EQ(o->model_repository, "./models");
  EXPECT_TRUE(help.empty());
}

TEST(ServerOptions, HelpListsEveryFlag) {
  const char* argv[] = {"infergate", "--help"};
  std::string help;
  ASSERT_TRUE(ParseServerOptions(2, argv, &help).ok());
  for (const char* flag : {"--address (default: \"0.0.0.0:50051\")", "--model-repository (default: \"./models\")",
                           "--max-receive-bytes (default: 67108864)", "--cpu-workers", "--intra-op-threads",
                           "--queue-capacity", "--drain-timeout", "--log-level", "--devices", "--simulate-devices", "--batching", "--cache-budget", "--state-file"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag << "\n" << help;
  }
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
                        "--max-tensor-rank=4"};
  std::string help;
  auto o = ParseServerOptions(9, argv, &help);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->drain_timeout.count(), 500);
  EXPECT_EQ(o->max_connection_age.count(), 300000);
  EXPECT_EQ(o->max_receive_bytes, uint64_t{1} << 20);
  EXPECT_EQ(o->scheduler.cache_budgets.at(DeviceId{DeviceKind::kCpu, 0}), uint64_t{1} << 30);
  EXPECT_EQ(o->scheduler.device_failure_cooldown.count(), 2000);
  ASSERT_EQ(o->discovery.simulated.size(), 1u);
  ASSERT_EQ(o->discovery.failing.size(), 1u);
  EXPECT_EQ(o->tensor_limits.max_rank, 4);
}

TEST(ServerOptions, BadValuesNameTheirFlag) {
  for (const char* bad : {"--drain-timeout=soon", "--max-connection-age=-1s", "--max-receive-bytes=lots",
                          "--cache-budget=cpu", "--simulate-failing-devices=cuda:0", "--devices=tpu",
                          "--queue-capacity=0"}) {
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

TEST(ServerOptions, OnlyLoopbackAddressesCountAsLocal) {
  for (const char* local : {"127.0.0.1:50051", "127.1.2.3:0", "localhost:8000", "[::1]:50051"}) {
    EXPECT_FALSE(ListensBeyondLoopback(local)) << local;
  }
  for (const char* open : {"0.0.0.0:50051", "[::]:50051", "10.0.0.5:50051", "myhost:1", ":50051"}) {
    EXPECT_TRUE(ListensBeyondLoopback(open)) << open;
  }
}

}  // namespace
}  // namespace infergate
