// The JSON pre-scan: depth and an upper bound on values, without parsing;
// strings (with escapes) hide brackets and commas.

#include "service/http/json_scan.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

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

}  // namespace
}  // namespace infergate
