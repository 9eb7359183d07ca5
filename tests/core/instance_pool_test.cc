// InstancePool: each instance lent to one borrower at a time, the most
// recently returned first, and a borrower waits while all are lent.

#include "model_store/instance_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace infergate {
namespace {

struct Counter {
  int runs = 0;
};

InstancePool<Counter> PoolOf(int n) {
  std::vector<std::unique_ptr<Counter>> instances;
  for (int i = 0; i < n; ++i) instances.push_back(std::make_unique<Counter>());
  return InstancePool<Counter>(std::move(instances));
}

TEST(InstancePool, LendsEachInstanceToOneBorrowerAtATime) {
  InstancePool<Counter> pool = PoolOf(3);
  ASSERT_EQ(pool.size(), 3u);
  InstancePool<Counter>::Loan a = pool.Borrow();
  InstancePool<Counter>::Loan b = pool.Borrow();
  InstancePool<Counter>::Loan c = pool.Borrow();
  EXPECT_NE(&*a, &*b);
  EXPECT_NE(&*a, &*c);
  EXPECT_NE(&*b, &*c);
  EXPECT_EQ(a.index() + b.index() + c.index(), 0u + 1u + 2u);
}

TEST(InstancePool, LendsTheLastReturnedFirst) {
  InstancePool<Counter> pool = PoolOf(3);
  size_t returned;
  {
    InstancePool<Counter>::Loan a = pool.Borrow();
    InstancePool<Counter>::Loan b = pool.Borrow();
    returned = a.index();
  }  // b goes back first, then a
  EXPECT_EQ(pool.Borrow().index(), returned);
}

TEST(InstancePool, ABorrowerWaitsUntilAnInstanceIsReturned) {
  InstancePool<Counter> pool = PoolOf(1);
  std::atomic<bool> lent{false};
  std::thread waiter;
  {
    InstancePool<Counter>::Loan held = pool.Borrow();
    held->runs = 1;
    waiter = std::thread([&] {
      InstancePool<Counter>::Loan loan = pool.Borrow();
      lent = true;
      ++loan->runs;
    });
    // Had the pool lent the held instance twice, the waiter would be done
    // long before this.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(lent.load()) << "an instance was lent while its only one was out";
  }
  waiter.join();
  EXPECT_TRUE(lent.load());
  EXPECT_EQ(pool.instances()[0]->runs, 2);
}

TEST(InstancePool, ManyThreadsNeverShareAnInstance) {
  constexpr int kInstances = 2;
  constexpr int kThreads = 6;
  constexpr int kRounds = 2000;
  InstancePool<Counter> pool = PoolOf(kInstances);
  std::vector<std::atomic<int>> holders(kInstances);
  std::atomic<int> shared{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int r = 0; r < kRounds; ++r) {
        InstancePool<Counter>::Loan loan = pool.Borrow();
        if (holders[loan.index()].fetch_add(1) != 0) ++shared;
        ++loan->runs;
        holders[loan.index()].fetch_sub(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(shared.load(), 0);
  int runs = 0;
  for (const auto& instance : pool.instances()) runs += instance->runs;
  EXPECT_EQ(runs, kThreads * kRounds);
}

}  // namespace
}  // namespace infergate
