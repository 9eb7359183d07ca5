#include "scheduler/execution/batch_cost.h"

#include <gtest/gtest.h>

#include <map>

namespace infergate {
namespace {

// Measures every size 1..n twice with `us(rows)`.
template <typename F>
void Learn(BatchCostModel& model, const std::string& key, int64_t n, F us) {
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t r = 1; r <= n; ++r) model.Record(key, r, us(r));
  }
}

TEST(BatchCost, UnmeasuredSizesAreTriedFirstLargestFirst) {
  BatchCostModel model;
  EXPECT_EQ(model.Choose("k", {1, 1, 1}), 3u);
  model.Record("k", 3, 100);
  EXPECT_EQ(model.Choose("k", {1, 1, 1}), 3u) << "one sample may be warm-up; measure again";
  model.Record("k", 3, 100);
  EXPECT_EQ(model.Choose("k", {1, 1, 1}), 2u);
  EXPECT_EQ(model.Choose("k", {5}), 1u) << "a single job is always taken whole";
}

TEST(BatchCost, TakesThePrefixWithTheBestRowsPerSecond) {
  BatchCostModel model;
  // Like OpenBLAS on a Linear layer: 1-2 rows cheap, 3-15 rows pay for
  // packing the weights, large batches amortise it.
  auto us = [](int64_t r) -> uint64_t { return r <= 2 ? 25 + 2 * r : r < 16 ? 170 + 5 * r : 150 + 5 * r; };
  Learn(model, "mlp", 64, us);
  EXPECT_EQ(model.Choose("mlp", {1, 1, 1, 1, 1}), 2u);  // 2 rows: 69k rows/s beats 5 rows: 26k
  std::vector<int64_t> many(40, 1);
  EXPECT_EQ(model.Choose("mlp", many), 40u);   // 40 rows: 114k rows/s
  EXPECT_EQ(model.Choose("mlp", {2, 3}), 1u);  // prefixes are whole jobs: 2 or 5 rows
  // A model on another key has a curve of its own.
  Learn(model, "linear", 8, [](int64_t r) -> uint64_t { return 100 + r; });
  EXPECT_EQ(model.Choose("linear", {1, 1, 1, 1}), 4u);
}

TEST(BatchCost, WaitingForCompanionsOnlyWhereABiggerBatchWasFasterPerRow) {
  BatchCostModel model;
  EXPECT_TRUE(model.WorthWaiting("conv", 1, 32)) << "nothing measured: wait, so bigger sizes get measured";
  model.Record("conv", 1, 800);
  model.Record("conv", 1, 800);
  EXPECT_TRUE(model.WorthWaiting("conv", 1, 32)) << "no bigger size measured yet";
  // Like a CPU conv net: 2 rows take more than twice as long as 1.
  Learn(model, "conv", 8, [](int64_t r) -> uint64_t { return 800 * r + 400 * (r - 1); });
  EXPECT_FALSE(model.WorthWaiting("conv", 1, 32));
  EXPECT_FALSE(model.WorthWaiting("conv", 3, 32));
  // Like a Linear layer: bigger batches amortise the weights.
  Learn(model, "mlp", 64, [](int64_t r) -> uint64_t { return 100 + 5 * r; });
  EXPECT_TRUE(model.WorthWaiting("mlp", 1, 64));
  EXPECT_TRUE(model.WorthWaiting("mlp", 20, 64));
  EXPECT_FALSE(model.WorthWaiting("mlp", 40, 64)) << "64 rows go only 14% faster per row than 40";
  EXPECT_FALSE(model.WorthWaiting("mlp", 20, 20)) << "no room to grow";
  // A gain under kWorthWaitingGain does not pay for the wait. (The demo CNN
  // with cached tensor blocks: 3 rows go 12% faster per row than 1.)
  Learn(model, "cnn", 4, [](int64_t r) -> uint64_t { return r == 3 ? 1787 : 673 * r; });
  EXPECT_FALSE(model.WorthWaiting("cnn", 1, 4));
  Learn(model, "flat", 4, [](int64_t r) -> uint64_t { return 1000 * r - 50 * (r - 1); });
  EXPECT_FALSE(model.WorthWaiting("flat", 1, 4));
}

TEST(BatchCost, RowsAreSplitAmongWorkersOnlyWhereThatFinishesThemClearlySooner) {
  BatchCostModel model;
  EXPECT_FALSE(model.SplitFinishesSooner("mlp", 8, 4)) << "nothing measured: keep the batch whole";
  // The demo mlp on this CPU, as the server measured it: the BLAS packs its
  // weights from 3 rows up, so 4 rows cost more than two runs of 2.
  const std::map<int64_t, uint64_t> mlp = {{1, 60},  {2, 70},  {3, 194}, {4, 176},
                                           {5, 191}, {6, 190}, {7, 211}, {8, 210}};
  Learn(model, "mlp", 8, [&](int64_t r) -> uint64_t { return mlp.at(r); });
  EXPECT_TRUE(model.SplitFinishesSooner("mlp", 8, 4)) << "2+2 on each worker: 140 us against 210";
  EXPECT_TRUE(model.SplitFinishesSooner("mlp", 3, 2)) << "2 rows in 70 us against 3 in 194";
  EXPECT_FALSE(model.SplitFinishesSooner("mlp", 8, 8)) << "a share of all rows is no split";
  // A fixed cost per batch: one batch of all is about as quick.
  Learn(model, "linear", 8, [](int64_t r) -> uint64_t { return 100 + 5 * r; });
  EXPECT_FALSE(model.SplitFinishesSooner("linear", 4, 3)) << "115 us against 120";
  // A conv net, about linear in rows: half the rows, half the time.
  Learn(model, "conv", 8, [](int64_t r) -> uint64_t { return 1000 * r; });
  EXPECT_TRUE(model.SplitFinishesSooner("conv", 4, 2));
  EXPECT_FALSE(model.SplitFinishesSooner("conv", 8, 7)) << "7000 us against 8000: under the 25% margin";
}

TEST(BatchCost, SometimesExploresAnotherSizeAndFollowsChanges) {
  BatchCostModel model;
  Learn(model, "k", 4, [](int64_t r) -> uint64_t { return r == 1 ? 10 : 1000; });
  int others = 0;
  for (uint64_t i = 0; i < 10 * BatchCostModel::kExploreEvery; ++i) {
    if (model.Choose("k", {1, 1, 1, 1}) != 1u) others++;
  }
  EXPECT_GT(others, 0);
  EXPECT_LE(others, 10);
  // Batches of 4 become cheap: the moving average follows within a few runs.
  for (int i = 0; i < 30; ++i) model.Record("k", 4, 12);
  EXPECT_EQ(model.Choose("k", {1, 1, 1, 1}), 4u);
  EXPECT_NEAR(model.CostUs("k", 4), 12, 5);
  EXPECT_EQ(model.CostUs("k", 9), -1);
  EXPECT_EQ(model.CostUs("other", 1), -1);
}

TEST(BatchCost, PreferredSizesFromTheConfigComeFirst) {
  BatchCostModel model;
  Learn(model, "k", 64, [](int64_t r) -> uint64_t { return r == 1 ? 1 : 1000; });  // 1 row looks best
  std::vector<int64_t> rows(40, 1);
  EXPECT_EQ(model.Choose("k", rows, {16, 32, 64}), 32u);
  EXPECT_EQ(model.Choose("k", {8, 8, 8, 8, 8}, {16, 32}), 4u);
  // No prefix has a preferred size: the measured costs decide.
  EXPECT_EQ(model.Choose("k", {1, 1, 1}, {16, 32}), 1u);
}

}  // namespace
}  // namespace infergate
