#include "scheduler/execution/batch_tensors.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <gtest/gtest.h>

namespace infergate {
namespace {

at::Tensor Rows(int64_t first, int64_t rows, int64_t cols) {
  return at::arange(first * cols, (first + rows) * cols, at::TensorOptions().dtype(at::kFloat)).reshape({rows, cols});
}

TEST(BatchTensors, ConcatThenSplitGivesEachRequestItsRows) {
  std::vector<std::vector<at::Tensor>> parts = {{Rows(0, 1, 3)}, {Rows(1, 2, 3)}, {Rows(3, 1, 3)}};
  std::vector<at::Tensor> joined = ConcatBatch(parts);
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_TRUE(at::equal(joined[0], Rows(0, 4, 3)));
  auto split = SplitBatch({{"y", joined[0].mul(2)}}, {1, 2, 1});
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->size(), 3u);
  EXPECT_TRUE(at::equal((*split)[1][0].tensor, Rows(1, 2, 3).mul(2)));
  EXPECT_EQ((*split)[2][0].name, "y");
}

TEST(BatchTensors, SingleRequestIsPassedThroughWithoutCopy) {
  at::Tensor t = Rows(0, 2, 3);
  std::vector<at::Tensor> joined = ConcatBatch({{t}});
  EXPECT_EQ(joined[0].data_ptr(), t.data_ptr());
}

TEST(BatchTensors, OutputsWithoutTheBatchDimensionAreAnError) {
  auto split = SplitBatch({{"scalar", at::arange(1)}}, {1, 1});
  EXPECT_EQ(split.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(split.status().message().find("scalar"), absl::string_view::npos);
}

}  // namespace
}  // namespace infergate
