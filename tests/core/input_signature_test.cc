#include "scheduler/repository/input_signature.h"

#include <gtest/gtest.h>

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
  auto order = MatchInputs(TwoInputs(), std::vector<TensorMeta>{{"", DType::kFloat32, sa}, {"", DType::kInt64, sb}}, "m");
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
  for (const Bad& b : cases) {
    absl::Status s = Check(Mlp(), b.metas);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.what;
    EXPECT_NE(s.message().find(b.field), absl::string_view::npos) << b.what << ": " << s;
    EXPECT_NE(s.message().find("'m'"), absl::string_view::npos) << b.what << ": " << s;
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
