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

}  // namespace
}  // namespace infergate
