// Instances read from their text (instance_text.h) against InstanceTensor's
// tree: the same tensor, bit for bit, where the text path answers, and the
// tree's answer (nullopt here) wherever the tree refuses or the text path
// is unsure.

#include "service/torchserve/instance_text.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>

#include "service/torchserve/instance_codec.h"

namespace infergate {
namespace {

enum class DecodedBy { kText, kTree };

// The text path's answer for `text`, checked against the tree's; which
// path answered.
DecodedBy Decode(const std::string& text, DType dtype) {
  CodecLimits limits;
  std::optional<at::Tensor> fast = InstanceTensorFromText(text, dtype, limits);
  absl::StatusOr<at::Tensor> tree = [&]() -> absl::StatusOr<at::Tensor> {
    nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) return absl::InvalidArgumentError("not JSON");
    return InstanceTensor(value, dtype, "body", limits);
  }();
  if (!fast) return DecodedBy::kTree;
  EXPECT_TRUE(tree.ok()) << text << ": the text path answered what the tree refuses: " << tree.status();
  if (!tree.ok()) return DecodedBy::kText;
  EXPECT_EQ(fast->scalar_type(), tree->scalar_type()) << text;
  EXPECT_EQ(fast->sizes(), tree->sizes()) << text;
  if (fast->scalar_type() == tree->scalar_type() && fast->sizes() == tree->sizes() && fast->numel() > 0) {
    const at::Tensor a = fast->contiguous(), b = tree->contiguous();
    EXPECT_EQ(std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()), 0) << text << " as " << DTypeName(dtype);
  }
  return DecodedBy::kText;
}

TEST(InstanceText, ListsOfNumbersAreReadFromTheTextAsTheTreeReadsThem) {
  struct Row {
    const char* text;
    DType dtype;
    DecodedBy path;
  };
  const std::vector<Row> rows = {
      {"[1, 2.5, -3e2]", DType::kFloat32, DecodedBy::kText},
      {" [[1, 2], [3, 4]] ", DType::kFloat32, DecodedBy::kText},
      {"[[[0.1], [-0]], [[1e-3], [5]]]", DType::kFloat64, DecodedBy::kText},
      {"[65504, 65520, 1e-8, -0.0, 0.333333]", DType::kFloat16, DecodedBy::kText},
      {"[3.3895314e38, 1e-40, 1.00390625]", DType::kBFloat16, DecodedBy::kText},
      {"[-9223372036854775808, 9223372036854775807]", DType::kInt64, DecodedBy::kText},
      {"[[-128, 127]]", DType::kInt8, DecodedBy::kText},
      {"[0, 255]", DType::kUInt8, DecodedBy::kText},
      {"[-2147483648, 2147483647]", DType::kInt32, DecodedBy::kText},
      {"[]", DType::kFloat32, DecodedBy::kText},
      {"[[], []]", DType::kFloat32, DecodedBy::kText},
      {"[[[]]]", DType::kInt64, DecodedBy::kText},
      // The tree's: refusals and what the text path leaves to it.
      {"[[1, 2], [3]]", DType::kFloat32, DecodedBy::kTree},
      {"[[1], 2]", DType::kFloat32, DecodedBy::kTree},
      {"[[], [1]]", DType::kFloat32, DecodedBy::kTree},
      {"[[1], [[2]]]", DType::kFloat32, DecodedBy::kTree},
      {"[true, 0]", DType::kFloat32, DecodedBy::kTree},
      {"[1, \"2\"]", DType::kFloat32, DecodedBy::kTree},
      {"[1, null]", DType::kFloat32, DecodedBy::kTree},
      {"[1.5]", DType::kInt64, DecodedBy::kTree},
      {"[300]", DType::kUInt8, DecodedBy::kTree},
      {"[9223372036854775808]", DType::kInt64, DecodedBy::kTree},
      {"[18446744073709551615]", DType::kFloat32, DecodedBy::kTree},
      {"[1e400]", DType::kFloat64, DecodedBy::kTree},
      {"[1e-400]", DType::kFloat64, DecodedBy::kTree},
      {"[1, 0]", DType::kBool, DecodedBy::kTree},
      {"[[[[[[[[[1]]]]]]]]]", DType::kFloat32, DecodedBy::kTree},
      {"[1,]", DType::kFloat32, DecodedBy::kTree},
      {"[1 2]", DType::kFloat32, DecodedBy::kTree},
      {"[01]", DType::kFloat32, DecodedBy::kTree},
      {"[1] x", DType::kFloat32, DecodedBy::kTree},
      {"[[1], [2]", DType::kFloat32, DecodedBy::kTree},
      {"5", DType::kFloat32, DecodedBy::kTree},
      {"{\"data\": [1]}", DType::kFloat32, DecodedBy::kTree},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(Decode(row.text, row.dtype), row.path) << row.text << " as " << DTypeName(row.dtype);
  }
}

TEST(InstanceText, RandomImagesInEveryPrintedFormAreReadAsTheTreeReadsThem) {
  std::mt19937_64 rng(5);
  for (const char* format : {"%.17g", "%.9g", "%.4f", "%g"}) {
    std::string text = "[";
    for (int c = 0; c < 3; ++c) {
      text += c ? ",[" : "[";
      for (int y = 0; y < 16; ++y) {
        text += y ? ",[" : "[";
        for (int x = 0; x < 16; ++x) {
          char number[64];
          std::snprintf(number, sizeof(number), format, std::uniform_real_distribution<double>(-2, 2)(rng));
          text += (x ? ", " : "");
          text += number;
        }
        text += "]";
      }
      text += "]";
    }
    text += "]";
    for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
      EXPECT_EQ(Decode(text, dtype), DecodedBy::kText) << format;
    }
  }
}

TEST(InstanceText, AV1BodysInstancesAreFoundWhereTheTreeWouldFindThem) {
  using Texts = std::vector<absl::string_view>;
  struct Row {
    const char* body;
    std::optional<Texts> texts;
  };
  const std::vector<Row> rows = {
      {R"({"instances": [[1, 2], [3, 4]]})", Texts{"[1, 2]", "[3, 4]"}},
      {R"( {"parameters": {"k": ["]", {"x": "\\"}]}, "instances":[[[1]]] , "id": 7} )", Texts{"[[1]]"}},
      {R"({"instances": [[1], [true]]})", Texts{"[1]", "[true]"}},  // the instance's reader refuses the second
      // The tree's.
      {R"({"instances": []})", std::nullopt},
      {R"({"instances": [1, 2]})", std::nullopt},
      {R"({"instances": [["a"]]})", std::nullopt},
      {R"({"instances": [{"data": [1]}]})", std::nullopt},
      {R"({"instances": [[1]], "instances": [[2]]})", std::nullopt},
      {R"({"inst\u0061nces": [[1]]})", std::nullopt},
      {R"({"instances": [[1]], "x": tru})", std::nullopt},
      {R"({"instances": [[1]]} x)", std::nullopt},
      {R"({"x": 1})", std::nullopt},
      {R"([[1]])", std::nullopt},
      {R"({"instances": [[1]])", std::nullopt},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(V1InstanceTexts(row.body), row.texts) << row.body;
  }
}

}  // namespace
}  // namespace infergate
