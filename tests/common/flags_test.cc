#include "common/flags.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace infergate {
namespace {

TEST(Flags, ParsesEveryForm) {
  std::string s = "a";
  int64_t n = 1;
  bool b = false, c = true;
  FlagSet f("usage");
  f.String("str", &s, "a string");
  f.Int("num", &n, "a number");
  f.Bool("on", &b, "a bool");
  f.Bool("keep", &c, "another bool");
  const char* argv[] = {"prog", "--str=x", "pos1", "--num", "42", "--on", "--nokeep", "pos2"};
  bool help = false;
  auto rest = f.Parse(8, argv, &help);
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(s, "x");
  EXPECT_EQ(n, 42);
  EXPECT_TRUE(b);
  EXPECT_FALSE(c);
  EXPECT_EQ(*rest, (std::vector<std::string>{"pos1", "pos2"}));
  EXPECT_FALSE(help);
}

TEST(Flags, ErrorsNameTheFlag) {
  int64_t n = 0;
  FlagSet f("usage");
  f.Int("num", &n, "a number");
  bool help = false;
  const char* bad_int[] = {"prog", "--num=abc"};
  auto r = f.Parse(2, bad_int, &help);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--num"), absl::string_view::npos);
  const char* unknown[] = {"prog", "--nope=1"};
  r = f.Parse(2, unknown, &help);
  EXPECT_NE(r.status().message().find("--nope"), absl::string_view::npos);
  const char* missing[] = {"prog", "--num"};
  EXPECT_FALSE(f.Parse(2, missing, &help).ok());
}

TEST(Flags, HelpListsEveryFlagWithItsDefault) {
  std::string s = "0.0.0.0:50051";
  int64_t n = 7;
  FlagSet f("usage line");
  f.String("address", &s, "where");
  f.Int("workers", &n, "how many");
  std::string help = f.Help();
  EXPECT_NE(help.find("usage line"), std::string::npos);
  EXPECT_NE(help.find("--address (default: \"0.0.0.0:50051\")"), std::string::npos) << help;
  EXPECT_NE(help.find("--workers (default: 7)"), std::string::npos) << help;
}

TEST(Flags, TypedFlagsParseOnceAndRepeatedFlagsCollect) {
  std::chrono::milliseconds timeout{30000};
  uint64_t bytes = 0;
  double seconds = 1;
  std::vector<std::string> inputs;
  FlagSet f("usage");
  f.Duration("drain-timeout", &timeout, "d");
  f.ByteSize("max-receive-bytes", &bytes, "b");
  f.Double("duration", &seconds, "s");
  f.Repeated("input", &inputs, "i");
  const char* argv[] = {"prog",    "--drain-timeout=500ms", "--max-receive-bytes", "64MiB", "--duration=2.5",
                        "--input", "x=1x4:random",          "--input=y=2:random",  "infer"};
  bool help = false;
  auto rest = f.Parse(9, argv, &help);
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(timeout.count(), 500);
  EXPECT_EQ(bytes, uint64_t{64} << 20);
  EXPECT_DOUBLE_EQ(seconds, 2.5);
  EXPECT_EQ(inputs, (std::vector<std::string>{"x=1x4:random", "y=2:random"}));
  EXPECT_EQ(*rest, std::vector<std::string>{"infer"});
  for (const char* bad : {"--drain-timeout=later", "--max-receive-bytes=lots", "--duration=fast"}) {
    const char* one[] = {"prog", bad};
    auto r = f.Parse(2, one, &help);
    ASSERT_FALSE(r.ok()) << bad;
    std::string flag(bad, std::string(bad).find('='));
    EXPECT_NE(r.status().message().find(flag), absl::string_view::npos) << r.status();
  }
}

}  // namespace
// A flag's rule sits where it is registered and is checked on the final
// value: an environment value the command line mends is not an error.
TEST(Flags, RulesAreCheckedOnTheFinalValueInRegistrationOrder) {
  int64_t threads = 2;
  std::chrono::milliseconds period{1000};
  FlagSet f("usage");
  f.Int("threads", &threads, "t", InRange(1, 64));
  f.Duration("period", &period, "p", [](const std::chrono::milliseconds& v) {
    return v.count() >= 10 ? std::string() : std::string("must be at least 10ms");
  });
  bool help = false;
  const char* fine[] = {"prog", "--threads=64", "--period=10ms"};
  ASSERT_TRUE(f.Parse(3, fine, &help).ok());
  EXPECT_TRUE(f.CheckValues().ok());
  const char* both[] = {"prog", "--threads=0", "--period=1ms"};
  ASSERT_TRUE(f.Parse(3, both, &help).ok()) << "parsing takes any integer; the rule is checked after";
  EXPECT_EQ(f.CheckValues(), absl::InvalidArgumentError("--threads: must be 1..64"));
  const char* period_only[] = {"prog", "--threads=1", "--period=9ms"};
  ASSERT_TRUE(f.Parse(3, period_only, &help).ok());
  EXPECT_EQ(f.CheckValues(), absl::InvalidArgumentError("--period: must be at least 10ms"));

  ::setenv("FLAGSTEST_THREADS", "0", 1);
  ASSERT_TRUE(f.ParseEnvironment("FLAGSTEST_").ok());
  const char* mended[] = {"prog", "--threads=3", "--period=10ms"};
  ASSERT_TRUE(f.Parse(3, mended, &help).ok());
  EXPECT_TRUE(f.CheckValues().ok());
  EXPECT_EQ(threads, 3);
  ::unsetenv("FLAGSTEST_THREADS");
}

}  // namespace infergate
