// Numeric `data` arrays decoded from a REST body's text
// (numeric_json_data.h): which arrays the walk takes, what the decoder
// refuses, and that a body parses to the very request (or error) the JSON
// tree gives, for every datatype and for numbers in every form.

#include "service/call/numeric_json_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "google/protobuf/util/message_differencer.h"
#include "service/open_inference/open_inference_json.h"

namespace infergate {
namespace {

std::vector<size_t> Found(const std::string& body) {
  std::optional<NumericData> numeric = FindNumericData(body);
  std::vector<size_t> out;
  if (numeric) {
    for (const auto& [index, array] : numeric->arrays) out.push_back(index);
  }
  return out;
}

TEST(NumericJsonData, TheWalkTakesFlatNumericDataOfInputsOnly) {
  struct Row {
    const char* what;
    std::string body;
    std::vector<size_t> found;
  };
  const std::vector<Row> rows = {
      {"one input", R"({"inputs":[{"name":"x","data":[1,2.5,-3e2]}]})", {0}},
      {"whitespace everywhere", " {\n \"inputs\" :\t[ { \"data\" : [ 1 ,\r\n 2 ] } ] } ", {0}},
      {"an empty array", R"({"inputs":[{"data":[]}]})", {0}},
      {"the second input's only", R"({"inputs":[{"data":[true]},{"data":[1]}]})", {1}},
      {"nested arrays are the tree's", R"({"inputs":[{"data":[[1,2],[3,4]]}]})", {}},
      {"strings are the tree's", R"({"inputs":[{"data":["a"]}]})", {}},
      {"a scalar is the tree's", R"({"inputs":[{"data":5}]})", {}},
      {"data outside inputs", R"({"data":[1],"outputs":[{"data":[1]}],"inputs":[{"x":{"data":[1]}}]})", {}},
      // Number text that is not JSON's numbers is taken, and the decoder
      // refuses it (TheDecoderRefusesWhatTheTreeMustAnswer); NaN is no
      // number text.
      {"number text, not JSON numbers",
       R"({"inputs":[{"data":[01]},{"data":[1.]},{"data":[.5]},{"data":[+1]},{"data":[NaN]},)"
       R"({"data":[1e]},{"data":[1,]},{"data":[1 2]},{"data":[-]}]})",
       {0, 1, 2, 3, 5, 6, 7, 8}},
      {"skipped values with brackets and escapes in strings",
       R"({"id":"a]\"}[","parameters":{"k":["}",{"x":"\\"}]},"inputs":[{"name":"[\"","data":[7]}]})",
       {0}},
      {"a key with an escape: unsure", R"({"inputs":[{"d\u0061ta":[1],"data":[2]}]})", {}},
      {"data twice: unsure", R"({"inputs":[{"data":[1],"data":[2]}]})", {}},
      {"inputs twice: unsure", R"({"inputs":[{"data":[1]}],"inputs":[{"data":[2]}]})", {}},
      {"text after the object: unsure", R"({"inputs":[{"data":[1]}]} x)", {}},
      {"not an object", R"([{"inputs":[{"data":[1]}]}])", {}},
      {"cut short", R"({"inputs":[{"data":[1,2)", {}},
  };
  for (const Row& row : rows) EXPECT_EQ(Found(row.body), row.found) << row.what;
}

TEST(NumericJsonData, TheRestOfTheBodyKeepsItsTextWithEachArrayAZero) {
  std::optional<NumericData> numeric =
      FindNumericData(R"({"inputs":[{"name":"a","data":[1, 2]},{"name":"b","data":[3]}],"id":"q"})");
  ASSERT_TRUE(numeric.has_value());
  EXPECT_EQ(numeric->body_without_arrays, R"({"inputs":[{"name":"a","data":0},{"name":"b","data":0}],"id":"q"})");
  EXPECT_EQ(numeric->arrays.at(0), "[1, 2]");
  EXPECT_EQ(numeric->arrays.at(1), "[3]");
}

TEST(NumericJsonData, TheDecoderRefusesWhatTheTreeMustAnswer) {
  std::string out;
  struct Row {
    const char* what;
    const char* array;
    DType dtype;
    int64_t elements;
    bool decoded;
  };
  const std::vector<Row> rows = {
      {"floats", "[1,2.5,-3e2]", DType::kFloat32, 3, true},
      {"a leading zero", "[01]", DType::kFloat32, 1, false},
      {"a point without digits after", "[1.]", DType::kFloat32, 1, false},
      {"a point without digits before", "[.5]", DType::kFloat32, 1, false},
      {"a plus sign", "[+1]", DType::kFloat32, 1, false},
      {"an exponent without digits", "[1e]", DType::kFloat32, 1, false},
      {"a comma at the end", "[1,]", DType::kFloat32, 1, false},
      {"no comma between", "[1 2]", DType::kFloat32, 1, false},
      {"a sign alone", "[-]", DType::kFloat32, 1, false},
      {"two signs", "[--1]", DType::kFloat32, 1, false},
      {"fewer than the shape", "[1,2]", DType::kFloat32, 3, false},
      {"more than the shape", "[1,2,3,4]", DType::kFloat32, 3, false},
      {"a fraction for an integer", "[1,2.0]", DType::kInt32, 2, false},
      {"an exponent for an integer", "[1e2]", DType::kInt64, 1, false},
      {"int8 out of range", "[128]", DType::kInt8, 1, false},
      {"uint8 negative", "[-1]", DType::kUInt8, 1, false},
      {"int32 out of range", "[2147483648]", DType::kInt32, 1, false},
      {"beyond int64", "[9223372036854775808]", DType::kInt64, 1, false},
      {"beyond int64 for a float: the tree's", "[18446744073709551616]", DType::kFloat64, 1, false},
      {"a double's overflow", "[1e400]", DType::kFloat64, 1, false},
      {"an underflow to zero", "[1e-400]", DType::kFloat64, 1, false},
      {"BOOL", "[1]", DType::kBool, 1, false},
      {"BYTES", "[1]", DType::kBytes, 1, false},
      {"int64 limits", "[-9223372036854775808,9223372036854775807]", DType::kInt64, 2, true},
      {"empty", "[]", DType::kFloat32, 0, true},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(DecodeNumericData(row.array, row.dtype, row.elements, &out), row.decoded) << row.what;
  }
}

absl::StatusOr<RestInferRequest> ParseBoth(const std::string& body, JsonDataDecoding decoding) {
  CodecLimits limits;
  return ParseRestInferRequest(body, std::nullopt, "m", "", limits, decoding);
}

// How a body's arrays must have been decoded: from the text (the fast
// path taken), by the tree, or either.
enum class Path { kText, kTree, kEither };

// The body parses to the same request, or the same error, both ways; true
// when it parsed. Where `path` says, the direct parse must have taken it: a
// decoder that declined everything would pass the comparison alone.
bool ExpectSameBothWays(const std::string& body, Path path = Path::kEither) {
  absl::StatusOr<RestInferRequest> direct = ParseBoth(body, JsonDataDecoding::kDirect);
  absl::StatusOr<RestInferRequest> tree = ParseBoth(body, JsonDataDecoding::kTree);
  EXPECT_EQ(direct.ok(), tree.ok()) << body;
  if (!direct.ok() || !tree.ok()) {
    EXPECT_EQ(direct.status(), tree.status()) << body;
    return false;
  }
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(direct->request, tree->request)) << body;
  if (path == Path::kText) {
    EXPECT_EQ(direct->inputs_decoded_from_text, 1) << "not decoded from the text: " << body;
  }
  if (path == Path::kTree) {
    EXPECT_EQ(direct->inputs_decoded_from_text, 0) << "not left to the tree: " << body;
  }
  return true;
}

std::string Body(const char* datatype, size_t count, const std::string& data) {
  return std::string(R"({"id":"r","inputs":[{"name":"x","shape":[)") + std::to_string(count) + R"(],"datatype":")" +
         datatype + R"(","data":)" + data + "}]}";
}

TEST(NumericJsonData, NumericArraysAreDecodedFromTheTextAndTheRestThroughTheTree) {
  const std::string body = R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1,2]},)"
                           R"({"name":"y","shape":[2],"datatype":"BOOL","data":[true,false]},)"
                           R"({"name":"z","shape":[2],"datatype":"INT32","data":[[3],[4]]}]})";
  absl::StatusOr<RestInferRequest> direct = ParseBoth(body, JsonDataDecoding::kDirect);
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(direct->inputs_decoded_from_text, 1);
  absl::StatusOr<RestInferRequest> tree = ParseBoth(body, JsonDataDecoding::kTree);
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_EQ(tree->inputs_decoded_from_text, 0);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(direct->request, tree->request));
  // One input the decoder refuses (an integer past uint64's range in text
  // the tree takes as a double) sends the whole body to the tree, which
  // serves it.
  absl::StatusOr<RestInferRequest> refused =
      ParseBoth(R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1,2]},)"
                R"({"name":"y","shape":[2],"datatype":"FP32","data":[18446744073709551616,1]}]})",
                JsonDataDecoding::kDirect);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->inputs_decoded_from_text, 0);
}

TEST(NumericJsonData, EveryDatatypeAndEveryNumberFormDecodesAsTheTreeDoes) {
  // The first ten rows are decoded from the text; the rest are refused by
  // the decoder and answered by the tree.
  const std::vector<std::pair<const char*, std::string>> arrays = {
      {"FP32", "[0,-0,-0.0,1,-1,0.1,1e-45,1.4e-45,3.4028235e38,3.4028236e38,1e39,-1e39,1E5,1e+5,2.5e-3]"},
      {"FP32", "[16777217,9007199254740993,-9223372036854775808,4.9e-324,2.2250738585072014e-308]"},
      {"FP64", "[0.1,0.30000000000000004,-0,1.7976931348623157e308,4.9e-324,123456789012345678]"},
      {"FP16", "[65504,65520,1e-8,-0,0.333333,6.1e-5]"},
      {"BF16", "[3.3895314e38,1e-40,-0.0,1.00390625,255.5]"},
      {"INT64", "[-9223372036854775808,9223372036854775807,0,-0]"},
      {"INT32", "[-2147483648,2147483647]"},
      {"INT16", "[-32768,32767]"},
      {"INT8", "[-128,127]"},
      {"UINT8", "[0,255]"},
      // Refused by the decoder: the tree's answer, error or not.
      {"INT32", "[1.5,2]"},
      {"INT8", "[1,1000]"},
      {"UINT8", "[-1,0]"},
      {"INT64", "[9223372036854775808,1]"},
      {"FP64", "[1e400,1]"},
      {"FP64", "[1e-400,1]"},
      {"FP32", "[18446744073709551615,1]"},
      {"BOOL", "[1,0]"},
  };
  for (size_t row = 0; row < arrays.size(); ++row) {
    const auto& [datatype, data] = arrays[row];
    const size_t count = static_cast<size_t>(std::count(data.begin(), data.end(), ',')) + 1;
    ExpectSameBothWays(Body(datatype, count, data), row < 10 ? Path::kText : Path::kTree);
    ExpectSameBothWays(Body(datatype, count + 1, data));  // a count off: the tree's error
  }
}

TEST(NumericJsonData, RandomFloatsInEveryPrintedFormDecodeAsTheTreeDoes) {
  std::mt19937_64 rng(7);
  const char* formats[] = {"%.9g", "%.17g", "%g", "%.3e", "%.8E", "%.1f"};
  for (const char* format : formats) {
    std::string data = "[";
    const size_t count = 2000;
    for (size_t i = 0; i < count; ++i) {
      double v;
      switch (i % 4) {
        case 0: v = std::uniform_real_distribution<double>(-1, 1)(rng); break;
        case 1:
          v = std::ldexp(std::uniform_real_distribution<double>(0.5, 1)(rng),
                         std::uniform_int_distribution<int>(-160, 140)(rng));
          break;
        case 2: v = static_cast<double>(std::uniform_int_distribution<int64_t>(-100000, 100000)(rng)); break;
        default: {
          const uint64_t bits = rng();
          std::memcpy(&v, &bits, sizeof(v));
          if (!std::isfinite(v)) v = 0;
        }
      }
      char text[64];
      std::snprintf(text, sizeof(text), format, v);
      data += (i ? "," : "");
      data += text;
    }
    data += "]";
    // Every finite double printed with an exponent where it needs one
    // decodes from the text as FP64 ("%.1f" prints the largest as integers
    // past int64's range, cut short by the buffer: the tree's).
    const bool fixed_point = std::string(format) == "%.1f";
    ExpectSameBothWays(Body("FP64", count, data), fixed_point ? Path::kEither : Path::kText);
    for (const char* datatype : {"FP32", "FP16", "BF16"}) {
      ExpectSameBothWays(Body(datatype, count, data));
    }
  }
}

// Each number decodes to the double std::from_chars gives, bit for bit:
// at the edges of exact arithmetic (digits below 2^53, powers of ten
// within 22, where a reader may compute instead of convert) and beyond.
TEST(NumericJsonData, NumbersAreTheDoublesTheTextNames) {
  std::mt19937_64 rng(11);
  std::vector<std::string> texts = {"9007199254740991",
                                    "9007199254740992",
                                    "9007199254740993",
                                    "0.9007199254740991",
                                    "9007199254740991e22",
                                    "9007199254740991e-22",
                                    "1e22",
                                    "1e23",
                                    "1e-22",
                                    "1e-23",
                                    "-0.0",
                                    "0.000000000000000000001",
                                    "123456789.123456",
                                    "0.1",
                                    "0.3",
                                    "2.2250738585072014e-308"};
  for (int i = 0; i < 20000; ++i) {
    const uint64_t digits = rng() % (uint64_t{1} << std::uniform_int_distribution<int>(1, 54)(rng));
    const int power = std::uniform_int_distribution<int>(-26, 26)(rng);
    const std::string sign = rng() % 2 ? "-" : "";
    if (i % 2) {
      texts.push_back(sign + std::to_string(digits) + "e" + std::to_string(power));
    } else {
      // The same digits with a decimal point (a negative power only).
      std::string d = std::to_string(digits);
      const size_t point = static_cast<size_t>(std::min<int>(std::abs(power), 20));
      if (d.size() <= point) d.insert(0, point - d.size() + 1, '0');
      d.insert(d.size() - point, point ? "." : "");
      texts.push_back(sign + d);
    }
  }
  std::string array = "[";
  for (size_t i = 0; i < texts.size(); ++i) array += (i ? "," : "") + texts[i];
  array += "]";
  std::string out;
  ASSERT_TRUE(DecodeNumericData(array, DType::kFloat64, static_cast<int64_t>(texts.size()), &out));
  ASSERT_EQ(out.size(), texts.size() * sizeof(double));
  for (size_t i = 0; i < texts.size(); ++i) {
    double expected = 0;
    const std::string& text = texts[i];
    const bool integer = text.find_first_of(".eE") == std::string::npos;
    if (integer) {
      int64_t n = 0;
      std::from_chars(text.data(), text.data() + text.size(), n);
      expected = static_cast<double>(n);
    } else {
      std::from_chars(text.data(), text.data() + text.size(), expected);
    }
    double got = 0;
    std::memcpy(&got, out.data() + i * sizeof(double), sizeof(double));
    ASSERT_EQ(std::memcmp(&got, &expected, sizeof(double)), 0) << text << ": " << got << " against " << expected;
  }
}

// Arrays longer than the decoder's chunk are read a chunk at a time, cut at
// a comma: every value lands where the tree puts it, and a cut never makes
// text that is not an array of numbers pass.
TEST(NumericJsonData, ArraysLongerThanAChunkDecodeAsTheTreeDoes) {
  std::mt19937_64 rng(3);
  std::string data = "[";
  size_t count = 0;
  while (data.size() < 3 * kNumericDataChunkBytes + 1000) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.17g", std::uniform_real_distribution<double>(-1e6, 1e6)(rng));
    data += (count++ ? ", " : "");
    data += text;
  }
  data += "]";
  for (const char* datatype : {"FP64", "FP32"}) ExpectSameBothWays(Body(datatype, count, data), Path::kText);

  // An empty element (",,") at every place around the first cut: refused
  // wherever it falls, as the tree refuses it.
  std::string out;
  for (size_t at = kNumericDataChunkBytes - 8; at < kNumericDataChunkBytes + 8; ++at) {
    std::string ones = "[";
    while (ones.size() < kNumericDataChunkBytes + 64) ones += "1,";
    ones.back() = ']';
    std::string doubled = ones;
    const size_t comma = doubled.find(',', at);
    doubled.insert(comma, ",");
    const int64_t commas = std::count(doubled.begin(), doubled.end(), ',');
    EXPECT_FALSE(DecodeNumericData(doubled, DType::kFloat32, commas + 1, &out)) << "empty element at " << comma;
    const int64_t fewer = std::count(ones.begin(), ones.end(), ',') + 1;
    EXPECT_TRUE(DecodeNumericData(ones, DType::kFloat32, fewer, &out));
  }
  // One element longer than a chunk (a number padded with spaces) is left
  // to the tree, which decodes it.
  const std::string padded = "[1," + std::string(kNumericDataChunkBytes + 10, ' ') + "2]";
  EXPECT_FALSE(DecodeNumericData(padded, DType::kFloat32, 2, &out));
  ExpectSameBothWays(Body("FP32", 2, padded), Path::kTree);
}

TEST(NumericJsonData, BodiesTheWalkIsUnsureOfOrTheTreeRefusesGiveTheTreesAnswer) {
  // The first two parse (the tree keeps one of the repeated keys); the
  // rest are errors, each the tree's.
  for (const std::string& body : {
           std::string(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","d\u0061ta":[1],"data":[2]}]})"),
           std::string(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1],"data":[2]}]})"),
           std::string(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}],"outputs":[{]})"),
           std::string(R"({"inputs":[{"shape":[1],"datatype":"FP32","data":[1]}]})"),
           std::string(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP99","data":[1]}]})"),
           std::string(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1],)"
                       R"("parameters":{"binary_data_size":4}}]})"),
           std::string(R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1,2]},)"
                       R"({"name":"y","shape":[1],"datatype":"INT8","data":[300]}]})"),
           std::string(R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1,2]}]} trailing)"),
           // Number bytes that are not JSON's numbers, in a body the rest
           // of which is wrong too (found by the fuzzer): the whole body is
           // not JSON, which only its own parse says, not "name: is missing".
           std::string(R"({"inputs":[{"shape":[3],"datatype":"FP32","data":[-1, 2, .27]}]})"),
           std::string(R"({"inputs":[{"name":"x","shape":[3],"datatype":"FP99","data":[1, 02, 3]}]})"),
           std::string(R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1, 2]},)"
                       R"({"name":"y","shape":[1],"datatype":"INT8","data":[+300]}]})"),
       }) {
    ExpectSameBothWays(body);
  }
}

}  // namespace
}  // namespace infergate
