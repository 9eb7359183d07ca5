#include "common/utf8.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

TEST(Utf8, FindsTheFirstInvalidByte) {
  struct Case {
    std::string text;
    std::optional<size_t> bad;
  };
  const std::vector<Case> cases = {
      {"", std::nullopt},
      {"plain ascii", std::nullopt},
      {std::string("nul\0ok", 6), std::nullopt},
      {"caf\xc3\xa9", std::nullopt},               // é
      {"\xe6\x97\xa5\xe6\x9c\xac", std::nullopt},  // 日本
      {"\xf0\x9f\x98\x80", std::nullopt},          // U+1F600
      {"\xf4\x8f\xbf\xbf", std::nullopt},          // U+10FFFF
      {"ab\xff", 2},                               // never valid
      {"a\x80", 1},                                // a continuation alone
      {"\xc3", 0},                                 // cut short
      {"x\xc0\xaf", 1},                            // overlong '/'
      {"\xe0\x80\xaf", 0},                         // overlong, three bytes
      {"\xed\xa0\x80", 0},                         // a surrogate
      {"\xf4\x90\x80\x80", 0},                     // past U+10FFFF
      {"ok\xe6\x97", 2},                           // cut short in three
  };
  for (const Case& c : cases) EXPECT_EQ(FirstInvalidUtf8(c.text), c.bad) << c.text;
}

}  // namespace
}  // namespace infergate
