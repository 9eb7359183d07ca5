#include "scheduler/repository/input_signature.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace infergate {
namespace {

InputSignature Mlp() {
  InputSignature s;
  s.max_batch_size = 64;
  s.inputs.push_back({"x", DType::kFloat32, std::vector<int64_t>{256}});
  return s;
}

InputSignature TwoInputs() {
  InputSignature s;
  s.max_batch_size = 8;
  s.inputs.push_back({"a", DType::kFloat32, std::vector<int64_t>{-1, 3}});
  s.inputs.push_back({"b", DType::kInt64, std::vector<int64_t>{2}});
  return s;
}

absl::Status Check(const InputSignature& sig, std::vector<TensorMeta> metas) {
  return MatchInputs(sig, metas, "m").status();
}

TEST(InputSignature, MatchesByNameInAnyOrder) {
  std::vector<int64_t> sa = {2, 5, 3}, sb = {2, 2};
  std::vector<TensorMeta> metas = {{"b", DType::kInt64, sb}, {"a", DType::kFloat32, sa}};
  auto order = MatchInputs(TwoInputs(), metas, "m");
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(*order, (std::vector<size_t>{1, 0}));
}

TEST(InputSignature, UnnamedTensorsMatchByPosition) {
  std::vector<int64_t> sa = {1, 4, 3}, sb = {1, 2};
  auto order =
      MatchInputs(TwoInputs(), std::vector<TensorMeta>{{"", DType::kFloat32, sa}, {"", DType::kInt64, sb}}, "m");
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(*order, (std::vector<size_t>{0, 1}));
}

struct Bad {
  const char* what;
  std::vector<TensorMeta> metas;
  const char* field;
};

TEST(InputSignature, EveryMismatchNamesItsField) {
  std::vector<int64_t> ok = {1, 256}, rank1 = {256}, wrong = {1, 255}, big = {65, 256}, zero = {0, 256};
  // clang-format off: a table, one row a line
  std::vector<Bad> cases = {
      {"empty", {}, "inputs:"},
      {"two for one", {{"x", DType::kFloat32, ok}, {"y", DType::kFloat32, ok}}, "inputs:"},
      {"unknown name", {{"y", DType::kFloat32, ok}}, "inputs[0].name"},
      {"dtype", {{"x", DType::kFloat64, ok}}, "inputs[0].dtype"},
      {"rank", {{"x", DType::kFloat32, rank1}}, "inputs[0].shape"},
      {"dim", {{"x", DType::kFloat32, wrong}}, "inputs[0].shape[1]"},
      {"batch too big", {{"x", DType::kFloat32, big}}, "inputs[0].shape[0]"},
      {"batch zero", {{"x", DType::kFloat32, zero}}, "inputs[0].shape[0]"},
  };
  // clang-format on
  for (const Bad& b : cases) {
    absl::Status s = Check(Mlp(), b.metas);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.what;
    EXPECT_NE(s.message().find(b.field), absl::string_view::npos) << b.what << ": " << s;
    EXPECT_NE(s.message().find("'m'"), absl::string_view::npos) << b.what << ": " << s;
  }
}

// Triton's example model "simple": INT32 [16] x 2, batching to 8.
InputSignature Simple() {
  InputSignature s;
  s.max_batch_size = 8;
  s.inputs.push_back({"INPUT0", DType::kInt32, std::vector<int64_t>{16}});
  s.inputs.push_back({"INPUT1", DType::kInt32, std::vector<int64_t>{16}});
  return s;
}

// Clients match on Triton's words (its example clients among them): each
// refusal starts with Triton's exact text, infergate's field and detail
// following in parentheses.
TEST(InputSignature, RefusalsStartWithTritonsWords) {
  std::vector<int64_t> ok = {1, 16}, short_row = {1, 15}, flat = {4}, nine = {9, 16}, two = {2, 16};
  struct Case {
    const char* what;
    std::vector<TensorMeta> metas;
    const char* triton;
    const char* field;
  };
  // clang-format off: a table, one row a line
  const std::vector<Case> cases = {
      {"one input missing", {{"INPUT0", DType::kInt32, ok}},
       "expected 2 inputs but got 1 inputs for model 'simple'. Got input(s) ['INPUT0'], but missing required input(s) "
       "['INPUT1']. Please provide all required input(s).",
       "(inputs: "},
      {"no inputs", {},
       "expected 2 inputs but got 0 inputs for model 'simple'. Got input(s) [], but missing required input(s) "
       "['INPUT0','INPUT1']. Please provide all required input(s).",
       "(inputs: "},
      {"unknown name", {{"INPUT0", DType::kInt32, ok}, {"INPUT9", DType::kInt32, ok}},
       "unexpected inference input 'INPUT9' for model 'simple'", "(inputs[1].name: "},
      {"dtype", {{"INPUT0", DType::kFloat32, ok}, {"INPUT1", DType::kInt32, ok}},
       "inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'", "(inputs[0].dtype: "},
      {"strings for numbers", {{"INPUT0", DType::kInt32, ok}, {"INPUT1", DType::kBytes, ok}},
       "inference input 'INPUT1' data-type is 'BYTES', but model 'simple' expects 'INT32'", "(inputs[1].dtype: "},
      {"a dim", {{"INPUT0", DType::kInt32, short_row}, {"INPUT1", DType::kInt32, ok}},
       "unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,15]", "(inputs[0].shape[1]: "},
      {"no batch dim", {{"INPUT0", DType::kInt32, flat}, {"INPUT1", DType::kInt32, flat}},
       "unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [4]", "(inputs[0].shape: "},
      {"batch too big", {{"INPUT0", DType::kInt32, nine}, {"INPUT1", DType::kInt32, nine}},
       "inference request batch-size must be <= 8 for 'simple'", "(inputs[0].shape[0]: "},
      {"batches differ", {{"INPUT0", DType::kInt32, ok}, {"INPUT1", DType::kInt32, two}},
       "input 'INPUT1' batch size does not match other inputs for 'simple'", "(inputs[1].shape[0]: "},
  };
  // clang-format on
  for (const Case& c : cases) {
    absl::Status s = MatchInputs(Simple(), c.metas, "simple").status();
    ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.what << ": " << s;
    EXPECT_TRUE(absl::StartsWith(s.message(), c.triton)) << c.what << ": " << s.message();
    EXPECT_NE(s.message().find(c.field), absl::string_view::npos) << c.what << ": " << s.message();
  }
}

TEST(InputSignature, DuplicateNamesAndDisagreeingBatchesAreRejected) {
  std::vector<int64_t> sa = {2, 5, 3}, sb = {3, 2};
  absl::Status dup = Check(TwoInputs(), {{"a", DType::kFloat32, sa}, {"a", DType::kFloat32, sa}});
  EXPECT_NE(dup.message().find("inputs[1].name"), absl::string_view::npos) << dup;
  absl::Status rows = Check(TwoInputs(), {{"a", DType::kFloat32, sa}, {"b", DType::kInt64, sb}});
  EXPECT_NE(rows.message().find("inputs[1].shape[0]"), absl::string_view::npos) << rows;
}

TEST(InputSignature, UndeclaredDimsAcceptAnyShape) {
  InputSignature s;
  s.inputs.push_back({"x", std::nullopt, std::nullopt});
  std::vector<int64_t> shape = {7, 1, 2};
  EXPECT_TRUE(Check(s, {{"x", DType::kInt8, shape}}).ok());
}

}  // namespace
}  // namespace infergate
