#include "service/flags.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace infergate
