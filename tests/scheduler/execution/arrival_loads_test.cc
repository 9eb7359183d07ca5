// ArrivalLoads' contract (arrival_loads.h), a test per numbered rule: a key
// loads once while it waits or loads, a lane runs one load at a time in
// order, lanes run apart, a full lane refuses, Stop drops what waits and
// waits for what runs, and a load that throws does not end its lane.
#include "scheduler/execution/arrival_loads.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace infergate {
namespace {

using std::chrono::seconds;

// Generous: a load here takes microseconds unless a test holds it.
constexpr seconds kPatience{60};

// A load that holds its lane until Release, and says when it has begun.
class HeldLoad {
 public:
  std::function<void()> Load() {
    return [this] {
      begun_.set_value();
      released_.wait();
    };
  }
  bool WaitBegun() { return begun_future_.wait_for(kPatience) == std::future_status::ready; }
  void Release() { release_.set_value(); }

 private:
  std::promise<void> begun_;
  std::future<void> begun_future_ = begun_.get_future();
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
};

// Loads that record their names in the order they ran.
class Ledger {
 public:
  std::function<void()> Load(const std::string& name) {
    return [this, name] {
      MutexLock lock(mu_);
      ran_.push_back(name);
    };
  }
  std::vector<std::string> ran() const {
    MutexLock lock(mu_);
    return ran_;
  }

 private:
  mutable Mutex mu_;
  std::vector<std::string> ran_;
};

// Asks a last load on `lane` and waits until it ran: the loads asked
// before it have run (or been dropped) by then.
bool Settle(ArrivalLoads& loads, const std::string& lane) {
  static std::atomic<int> settles{0};
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> ran = done->get_future();
  if (!loads.Ask(lane, "settle " + std::to_string(++settles), [done] { done->set_value(); })) return false;
  return ran.wait_for(kPatience) == std::future_status::ready;
}

TEST(ArrivalLoads, AKeyWaitingOrLoadingIsNotQueuedAgain) {
  ArrivalLoads loads;
  HeldLoad held;
  Ledger ledger;
  ASSERT_TRUE(loads.Ask("cuda:0", "a", held.Load()));
  ASSERT_TRUE(held.WaitBegun());
  EXPECT_TRUE(loads.Ask("cuda:0", "a", ledger.Load("a again, while a loads")));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(loads.Ask("cuda:0", "b", ledger.Load("b" + std::to_string(i))));
  EXPECT_EQ(loads.Waiting("cuda:0"), 1u);
  held.Release();
  ASSERT_TRUE(Settle(loads, "cuda:0"));
  EXPECT_EQ(ledger.ran(), std::vector<std::string>{"b0"});
  // Once a key has loaded it may be asked for again.
  EXPECT_TRUE(loads.Ask("cuda:0", "b", ledger.Load("b later")));
  ASSERT_TRUE(Settle(loads, "cuda:0"));
  EXPECT_EQ(ledger.ran(), (std::vector<std::string>{"b0", "b later"}));
}

TEST(ArrivalLoads, ALaneRunsItsLoadsOneAtATimeInTheOrderAsked) {
  ArrivalLoads loads;
  HeldLoad held;
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  Mutex mu;
  std::vector<std::string> order;
  auto load = [&](const std::string& name) {
    return [&, name] {
      const int now = ++running;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      {
        MutexLock lock(mu);
        order.push_back(name);
      }
      --running;
    };
  };
  ASSERT_TRUE(loads.Ask("cuda:0", "first", held.Load()));
  ASSERT_TRUE(held.WaitBegun());
  for (const char* name : {"c", "a", "d", "b"}) ASSERT_TRUE(loads.Ask("cuda:0", name, load(name)));
  held.Release();
  ASSERT_TRUE(Settle(loads, "cuda:0"));
  MutexLock lock(mu);
  EXPECT_EQ(order, (std::vector<std::string>{"c", "a", "d", "b"}));
  EXPECT_EQ(most.load(), 1);
}

TEST(ArrivalLoads, LanesRunApart) {
  ArrivalLoads loads;
  HeldLoad held;
  ASSERT_TRUE(loads.Ask("cuda:0", "a", held.Load()));
  ASSERT_TRUE(held.WaitBegun());
  // cuda:1's load runs while cuda:0's is held.
  EXPECT_TRUE(Settle(loads, "cuda:1")) << "a load on cuda:1 waited for cuda:0's";
  held.Release();
}

TEST(ArrivalLoads, AFullLaneRefusesAndQueuesNothing) {
  ArrivalLoads loads(/*capacity=*/2);
  HeldLoad held;
  Ledger ledger;
  ASSERT_TRUE(loads.Ask("cuda:0", "running", held.Load()));
  ASSERT_TRUE(held.WaitBegun());
  EXPECT_TRUE(loads.Ask("cuda:0", "a", ledger.Load("a")));
  EXPECT_TRUE(loads.Ask("cuda:0", "b", ledger.Load("b")));
  EXPECT_FALSE(loads.Ask("cuda:0", "c", ledger.Load("c")));
  EXPECT_TRUE(loads.Ask("cuda:0", "a", ledger.Load("a again"))) << "a waits already: nothing is queued";
  EXPECT_EQ(loads.Waiting("cuda:0"), 2u);
  // Another lane has room of its own.
  EXPECT_TRUE(loads.Ask("cuda:1", "c", ledger.Load("c on cuda:1")));
  held.Release();
  // The lane is full until a and b have run: wait for them, not a settle.
  for (auto end = std::chrono::steady_clock::now() + kPatience;
       ledger.ran().size() < 3 && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(Settle(loads, "cuda:0"));
  std::vector<std::string> ran = ledger.ran();
  std::sort(ran.begin(), ran.end());
  EXPECT_EQ(ran, (std::vector<std::string>{"a", "b", "c on cuda:1"}));
}

TEST(ArrivalLoads, StopDropsTheWaitingLoadsAndWaitsForTheRunningOne) {
  ArrivalLoads loads;
  HeldLoad held;
  Ledger ledger;
  std::atomic<bool> running_finished{false};
  ASSERT_TRUE(loads.Ask("cuda:0", "running", [&] {
    held.Load()();
    running_finished = true;
  }));
  ASSERT_TRUE(held.WaitBegun());
  ASSERT_TRUE(loads.Ask("cuda:0", "waiting", ledger.Load("waiting")));
  std::future<void> stopped = std::async(std::launch::async, [&] { loads.Stop(); });
  // Stop waits for the held load; Ask is refused from the moment it began.
  while (loads.Ask("cuda:1", "probe", [] {})) std::this_thread::yield();
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout)
      << "Stop returned while a load was running";
  held.Release();
  ASSERT_EQ(stopped.wait_for(kPatience), std::future_status::ready);
  EXPECT_TRUE(running_finished);
  EXPECT_TRUE(ledger.ran().empty()) << "a waiting load ran after Stop";
  EXPECT_FALSE(loads.Ask("cuda:0", "after", ledger.Load("after")));
  EXPECT_EQ(loads.Waiting("cuda:0"), 0u);
}

TEST(ArrivalLoads, ALoadThatThrowsDoesNotEndItsLane) {
  ArrivalLoads loads;
  Ledger ledger;
  ASSERT_TRUE(loads.Ask("cuda:0", "throws", [] { throw std::runtime_error("a load failed"); }));
  ASSERT_TRUE(loads.Ask("cuda:0", "next", ledger.Load("next")));
  ASSERT_TRUE(Settle(loads, "cuda:0"));
  EXPECT_EQ(ledger.ran(), std::vector<std::string>{"next"});
}

}  // namespace
}  // namespace infergate
