// The JSON pre-scan: depth and an upper bound on values, without parsing;
// strings (with escapes) hide brackets and commas.

#include "service/http/json_scan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace infergate {
namespace {

// The number of values the parsed tree really has, to hold the bound to.
uint64_t CountValues(const nlohmann::json& j) {
  uint64_t n = 1;
  if (j.is_structured()) {
    for (const auto& item : j) n += CountValues(item);
  }
  return n;
}

TEST(JsonScan, DepthAndAnUpperBoundOnValues) {
  const char* texts[] = {
      "0",
      "[]",
      "{}",
      "[1,2,3]",
      R"({"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3,4]]}]})",
      R"({"a":"[[[,,,]]]","b":"\"[,","c":[{"d":{}}]})",
      R"([[[[[[[[]]]]]]]])",
  };
  const int depths[] = {0, 1, 1, 1, 5, 4, 8};
  for (size_t i = 0; i < std::size(texts); ++i) {
    SCOPED_TRACE(texts[i]);
    JsonScan scan = ScanJson(texts[i]);
    EXPECT_EQ(scan.max_depth, depths[i]);
    EXPECT_GE(scan.values, CountValues(nlohmann::json::parse(texts[i])));
  }
}

TEST(JsonScan, DeepBodiesAreRefusedAndOrdinaryOnesPass) {
  std::string deep(1 << 20, '[');
  JsonScan scan = ScanJson(deep);
  EXPECT_EQ(scan.max_depth, 1 << 20);
  absl::Status refused = CheckScannedJson(scan, "the request body");
  EXPECT_TRUE(absl::IsInvalidArgument(refused));
  EXPECT_NE(refused.message().find("the request body"), std::string::npos);
  std::string nested_data = R"({"inputs":[{"data":)" + std::string(64, '[') + std::string(64, ']') + "}]}";
  EXPECT_TRUE(CheckScannedJson(ScanJson(nested_data), "body").ok());
}

TEST(JsonScan, ANulByteIsRefusedWhereverItIs) {
  // nlohmann's parser would end the document at the NUL and ignore the rest.
  const std::string text("{\"a\":1}\0{\"inputs\":[]}", 21);
  JsonScan scan = ScanJson(text);
  EXPECT_EQ(scan.first_nul, 7);
  absl::Status s = CheckScannedJson(scan, "the request body");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("NUL byte at offset 7"), std::string::npos) << s;
  EXPECT_EQ(ScanJson("{\"a\":\"\\u0000\"}").first_nul, -1);  // an escaped NUL is fine
}

TEST(JsonScan, TreeBytesGrowWithValuesNotBytes) {
  std::string zeros = "[0";
  for (int i = 0; i < 999; ++i) zeros += ",0";
  zeros += "]";
  std::string one_long_string = "[\"" + std::string(4000, 'x') + "\"]";
  EXPECT_GE(ScanJson(zeros).TreeBytes(), 1000 * 16u);
  // A long string's tree is its characters once more, not a node per byte.
  EXPECT_GE(ScanJson(one_long_string).TreeBytes(), 4000u);
  EXPECT_LT(ScanJson(one_long_string).TreeBytes(), 4300u);
  // Short strings are each a heap object: a million one-byte strings are
  // some 112 MB of tree, not 4 MB.
  std::string letters = "[\"a\"";
  for (int i = 0; i < 999; ++i) letters += ",\"a\"";
  letters += "]";
  EXPECT_GE(ScanJson(letters).TreeBytes(), 1000 * (JsonScan::kTreeBytesPerValue + JsonScan::kTreeBytesPerString));
  EXPECT_EQ(ScanJson(letters).strings, 1000u);
  EXPECT_EQ(ScanJson(R"({"key": "a string longer than fifteen", "b": "\"q\""})").strings, 4u);
}

// The scan byte by byte, one state per byte, as it was first written: the
// table-driven scan must give the very same counts on any text, JSON or
// not (escapes at the end, NULs in strings, unclosed strings).
JsonScan ReferenceScan(absl::string_view text) {
  JsonScan scan;
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  uint64_t separators = 0, containers = 0, string_chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\0' && scan.first_nul < 0) scan.first_nul = static_cast<int64_t>(i);
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
        ++scan.strings;
        if (string_chars > JsonScan::kInlineStringChars) scan.string_heap += string_chars + 1 + 16;
        continue;
      }
      ++string_chars;
      continue;
    }
    if (c == '"') {
      in_string = true;
      string_chars = 0;
    } else if (c == '[' || c == '{') {
      ++containers;
      depth += 1;
      scan.max_depth = std::max(scan.max_depth, depth);
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    } else if (c == ',') {
      ++separators;
    } else if (c == ':') {
      ++scan.members;
    }
  }
  scan.values = separators + 2 * containers + 1;
  return scan;
}

TEST(JsonScan, CountsAsTheBytewiseScanDoesOnAnyText) {
  std::mt19937 rng(5);
  const std::string alphabet = std::string("[]{}\",:0123456789.-e aZ\\") + std::string(1, '\0');
  std::vector<std::string> texts = {"",
                                    "\"",
                                    "\"\\",
                                    "\"\\\"",
                                    "\"abc\\\"def\"",
                                    "[\"\\\0\"]",
                                    "\"" + std::string(40, 'x') + "\",\"" + std::string(15, 'y') + "\""};
  for (int i = 0; i < 3000; ++i) {
    std::string text(std::uniform_int_distribution<size_t>(0, 80)(rng), ' ');
    for (char& c : text) c = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
    texts.push_back(text);
  }
  for (const std::string& text : texts) {
    const JsonScan got = ScanJson(text);
    const JsonScan want = ReferenceScan(text);
    ASSERT_EQ(got.values, want.values) << text;
    ASSERT_EQ(got.members, want.members) << text;
    ASSERT_EQ(got.max_depth, want.max_depth) << text;
    ASSERT_EQ(got.first_nul, want.first_nul) << text;
    ASSERT_EQ(got.strings, want.strings) << text;
    ASSERT_EQ(got.string_heap, want.string_heap) << text;
  }
}

}  // namespace
}  // namespace infergate
