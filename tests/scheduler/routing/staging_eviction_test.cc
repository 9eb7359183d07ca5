// The staged copies' eviction order as one table: each copy's recent demand
// and last use in, the order a load evicts them out.
#include "scheduler/routing/staging_eviction.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

struct EvictionRow {
  const char* what;
  std::vector<StagedCopy> copies;  // model, requests per second, last use
  std::vector<std::string> order;
};

TEST(StagedEviction, Table) {
  // clang-format off: a table, one row a line
  const std::vector<EvictionRow> rows = {
      {"none staged: nothing to evict",
       {}, {}},
      {"the least asked for first, however recently used",
       {{"popular", 3.0, 1}, {"cold", 0.5, 9}}, {"cold", "popular"}},
      {"no demand measured (the window off): the least recently used first",
       {{"b", 0, 7}, {"a", 0, 2}, {"c", 0, 5}}, {"a", "c", "b"}},
      {"equal demand: the least recently used of them first, after the less asked for",
       {{"x", 2.0, 8}, {"y", 2.0, 3}, {"z", 1.0, 9}}, {"z", "y", "x"}},
      {"a model asked for once lately goes before one asked for steadily, though used last",
       {{"steady", 4.0, 10}, {"once", 0.5, 11}, {"gone", 0.01, 1}}, {"gone", "once", "steady"}},
  };
  // clang-format on
  for (const EvictionRow& row : rows) {
    std::vector<std::string> order;
    for (size_t i : StagedEvictionOrder(row.copies)) order.push_back(row.copies[i].model);
    EXPECT_EQ(order, row.order) << row.what;
  }
}

}  // namespace
}  // namespace infergate
