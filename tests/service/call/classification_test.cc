#include "service/call/classification.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

namespace infergate {
namespace {

std::vector<std::string> Texts(const std::vector<ClassScore>& row) {
  std::vector<std::string> out;
  for (const ClassScore& c : row)
    out.push_back(c.score_text + ":" + std::to_string(c.index) + (c.label.empty() ? "" : ":" + c.label));
  return out;
}

TEST(ClassificationTest, TopKPerBatchRowHighestFirstTiesByIndex) {
  at::Tensor scores = at::tensor({0.1f, 0.7f, 0.2f, 0.7f, 0.5f, 0.0f, 3.0f, -1.0f}).reshape({2, 4});
  absl::StatusOr<std::vector<std::vector<ClassScore>>> top = TopClasses(scores, /*batched=*/true, 3, nullptr, "f");
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ(top->size(), 2u);
  EXPECT_EQ(Texts((*top)[0]), (std::vector<std::string>{"0.700000:1", "0.700000:3", "0.200000:2"}));
  EXPECT_EQ(Texts((*top)[1]), (std::vector<std::string>{"3.000000:2", "0.500000:0", "0.000000:1"}));
}

TEST(ClassificationTest, AnUnbatchedOutputIsOneRowOfAllItsElements) {
  at::Tensor scores = at::arange(6, at::kFloat).reshape({2, 3});
  absl::StatusOr<std::vector<std::vector<ClassScore>>> top = TopClasses(scores, /*batched=*/false, 2, nullptr, "f");
  ASSERT_TRUE(top.ok());
  ASSERT_EQ(top->size(), 1u);
  EXPECT_EQ(Texts((*top)[0]), (std::vector<std::string>{"5.000000:5", "4.000000:4"}));
  ClassBytes bytes = ClassesAsBytes(*top, false);
  EXPECT_EQ(bytes.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(bytes.raw, std::string("\x0a\0\0\0"
                                   "5.000000:5"
                                   "\x0a\0\0\0"
                                   "4.000000:4",
                                   28));
}

TEST(ClassificationTest, LabelsIntegersNanAndAskingForMoreThanThereAre) {
  std::vector<std::string> labels = {"cat", "dog"};  // fewer labels than classes
  at::Tensor counts = at::tensor({int64_t{5}, int64_t{9}, int64_t{7}}).reshape({1, 3});
  auto top = TopClasses(counts, true, 10, &labels, "f");
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(Texts((*top)[0]), (std::vector<std::string>{"9:1:dog", "7:2", "5:0:cat"}));
  at::Tensor with_nan = at::tensor({NAN, 1.0f, 2.0f});
  top = TopClasses(with_nan, false, 3, nullptr, "f");
  ASSERT_TRUE(top.ok());
  EXPECT_EQ((*top)[0][2].index, 0u);  // NaN last
  ClassBytes bytes = ClassesAsBytes(*TopClasses(counts, true, 2, nullptr, "f"), true);
  EXPECT_EQ(bytes.shape, (std::vector<int64_t>{1, 2}));
}

TEST(ClassificationTest, AnEmptyBatchAndABoolOutput) {
  auto top = TopClasses(at::zeros({0, 4}), true, 3, nullptr, "f");
  ASSERT_TRUE(top.ok());
  EXPECT_TRUE(top->empty());
  EXPECT_EQ(ClassesAsBytes(*top, true).shape, (std::vector<int64_t>{0, 0}));
  auto refused = TopClasses(at::ones({2}, at::kBool), false, 1, nullptr, "outputs[0].parameters.classification");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("outputs[0].parameters.classification"), absl::string_view::npos);
}

}  // namespace
}  // namespace infergate
