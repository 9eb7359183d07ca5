#include "common/wire_strings.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

std::string Serialized(const std::vector<std::string>& strings) {
  std::string out;
  for (const std::string& s : strings) AppendSerializedString(s, &out);
  return out;
}

TEST(WireStrings, RoundTripsAnyBytes) {
  const std::vector<std::string> strings = {"", "a", std::string("nul\0inside", 10), std::string(70000, 'x'), "日本"};
  const std::string wire = Serialized(strings);
  std::vector<absl::string_view> views;
  for (const std::string& s : strings) views.push_back(s);
  EXPECT_EQ(wire.size(), SerializedSize(views));
  absl::StatusOr<std::vector<absl::string_view>> parsed = ParseSerializedStrings(wire, 5, "raw_input_contents[0]");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 5u);
  for (size_t i = 0; i < strings.size(); ++i) EXPECT_EQ((*parsed)[i], strings[i]) << i;
}

TEST(WireStrings, MalformedBytesNameTheFieldAndElement) {
  const std::string two = Serialized({"ab", "cd"});
  struct Case {
    std::string bytes;
    int64_t elements;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {two.substr(0, 8), 2, "BYTES element 1: its 4-byte length is cut off (2 bytes left)"},
      {two.substr(0, 11), 2, "BYTES element 1 claims 2 bytes but 1 remain"},
      {two + "z", 2, "1 bytes follow the last of the shape's 2 BYTES elements"},
      {std::string("\xff\xff\xff\xff", 4), 1, "BYTES element 0 claims 4294967295 bytes but 0 remain"},
      // A shape claiming a billion strings in 8 bytes is refused before any allocation.
      {two, 1000000000, "too few for 1000000000 BYTES elements"},
  };
  for (const Case& c : cases) {
    absl::Status s = ParseSerializedStrings(c.bytes, c.elements, "raw_input_contents[3]").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.needle;
    EXPECT_NE(s.message().find("raw_input_contents[3]"), std::string::npos) << s;
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace infergate
