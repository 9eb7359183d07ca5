// ArrivalLoads' contract (arrival_loads.h), a test per numbered rule: a key
// loads once for every request held for it, a lane runs one load at a
// time in order, lanes run apart, the held requests go on once the load
// has run, a full lane or load refuses, Stop hands every held request on
// exactly once, a load that throws does not end its lane, and what a load
// asked now would wait for.
#include "scheduler/execution/arrival_loads.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/cpu_policy.h"
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

// Loads and thens that write their names, in the order they ran.
class Ledger {
 public:
  std::function<void()> Note(const std::string& name) {
    return [this, name] {
      MutexLock lock(mu_);
      ran_.push_back(name);
    };
  }
  std::vector<std::string> ran() const {
    MutexLock lock(mu_);
    return ran_;
  }
  // Waits until `n` entries were written.
  bool WaitFor(size_t n) const {
    for (auto end = std::chrono::steady_clock::now() + kPatience; std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(std::chrono::milliseconds(1))) {
      if (ran().size() >= n) return true;
    }
    return false;
  }

 private:
  mutable Mutex mu_;
  std::vector<std::string> ran_;
};

// In each test the ArrivalLoads is declared after what its loads use, so
// it stops (and joins its lanes) before they go.

// Loads and requests that hand on no hold (the hold's own test is last).
bool Ask(ArrivalLoads& loads, const std::string& lane, const std::string& key, std::function<void()> load,
         std::function<void()> then, double estimate_us = 0) {
  return loads.Ask(
      lane, key,
      [load = std::move(load)] {
        load();
        return ArrivalLoads::Hold();
      },
      [then = std::move(then)](const ArrivalLoads::Hold&) { then(); }, estimate_us);
}

TEST(ArrivalLoads, AKeyLoadsOnceAndEveryRequestHeldForItGoesOnAfterInOrder) {
  HeldLoad held;
  Ledger ledger;
  ArrivalLoads loads;
  ASSERT_TRUE(Ask(loads, "cuda:0", "a", held.Load(), ledger.Note("a's first request")));
  ASSERT_TRUE(held.WaitBegun());
  // While a loads: a's next request joins it; b's three share one load.
  EXPECT_TRUE(Ask(loads, "cuda:0", "a", ledger.Note("a loaded twice"), ledger.Note("a's second request")));
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(Ask(loads, "cuda:0", "b", ledger.Note("b loaded " + std::to_string(i)),
                    ledger.Note("b's request " + std::to_string(i))));
  }
  EXPECT_EQ(loads.Waiting("cuda:0"), 1u);
  EXPECT_EQ(loads.Held("cuda:0"), 5u) << "a's two requests and b's three";
  EXPECT_EQ(loads.Held("cuda:1"), 0u);
  EXPECT_TRUE(ledger.ran().empty()) << "a request went on before its load ran";
  held.Release();
  ASSERT_TRUE(ledger.WaitFor(6));
  EXPECT_EQ(loads.Held("cuda:0"), 0u);
  EXPECT_EQ(ledger.ran(), (std::vector<std::string>{"a's first request", "a's second request", "b loaded 0",
                                                    "b's request 0", "b's request 1", "b's request 2"}));
  // Once a key's requests went on, it loads again when asked.
  EXPECT_TRUE(Ask(loads, "cuda:0", "b", ledger.Note("b loaded again"), ledger.Note("b's later request")));
  ASSERT_TRUE(ledger.WaitFor(8));
  EXPECT_EQ(ledger.ran().back(), "b's later request");
}

TEST(ArrivalLoads, ALaneRunsItsLoadsOneAtATimeInTheOrderAsked) {
  HeldLoad held;
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  Ledger ledger;
  auto load = [&](const std::string& name) {
    return [&, name] {
      const int now = ++running;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      ledger.Note(name)();
      --running;
    };
  };
  ArrivalLoads loads;
  ASSERT_TRUE(Ask(loads, "cuda:0", "first", held.Load(), [] {}));
  ASSERT_TRUE(held.WaitBegun());
  for (const char* name : {"c", "a", "d", "b"}) ASSERT_TRUE(Ask(loads, "cuda:0", name, load(name), [] {}));
  held.Release();
  ASSERT_TRUE(ledger.WaitFor(4));
  EXPECT_EQ(ledger.ran(), (std::vector<std::string>{"c", "a", "d", "b"}));
  EXPECT_EQ(most.load(), 1);
}

TEST(ArrivalLoads, BeforeSaysWhatALoadAskedNowWouldWaitFor) {
  HeldLoad held;
  HeldLoad late;
  ArrivalLoads loads;
  auto before = [&](const std::string& lane, const std::string& key) { return loads.Before(lane, key); };
  ArrivalLoads::Ahead none = before("cuda:0", "x");
  EXPECT_EQ(none.running_left_us, 0);
  EXPECT_EQ(none.waiting_us, 0);
  EXPECT_FALSE(none.key_running);
  // a runs (expected to take 1000 s), b (2 ms) and c (3 ms) wait.
  constexpr double kLong = 1e9;
  ASSERT_TRUE(Ask(loads, "cuda:0", "a", held.Load(), [] {}, kLong));
  ASSERT_TRUE(held.WaitBegun());
  ASSERT_TRUE(Ask(loads, "cuda:0", "b", [] {}, [] {}, 2000));
  ASSERT_TRUE(Ask(loads, "cuda:0", "c", [] {}, [] {}, 3000));
  const ArrivalLoads::Ahead a = before("cuda:0", "a");
  EXPECT_TRUE(a.key_running) << "a request for a would join its running load";
  EXPECT_GT(a.running_left_us, kLong - 1e6 * kPatience.count());
  EXPECT_LE(a.running_left_us, kLong);
  EXPECT_EQ(a.waiting_us, 0);
  const ArrivalLoads::Ahead b = before("cuda:0", "b");
  EXPECT_FALSE(b.key_running);
  EXPECT_GT(b.running_left_us, kLong - 1e6 * kPatience.count());
  EXPECT_EQ(b.waiting_us, 0) << "b waits first";
  EXPECT_EQ(before("cuda:0", "c").waiting_us, 2000) << "c waits behind b";
  EXPECT_EQ(before("cuda:0", "x").waiting_us, 5000) << "a new key waits behind b and c";
  EXPECT_EQ(before("cuda:1", "x").running_left_us, 0) << "another lane";
  held.Release();
  for (auto end = std::chrono::steady_clock::now() + kPatience;
       loads.Waiting("cuda:0") > 0 && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // A load running past its estimate has nothing left by it, not less.
  ASSERT_TRUE(Ask(loads, "cuda:0", "d", late.Load(), [] {}, 1));
  ASSERT_TRUE(late.WaitBegun());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(before("cuda:0", "x").running_left_us, 0);
  late.Release();
}

TEST(ArrivalLoads, LanesRunApart) {
  HeldLoad held;
  Ledger ledger;
  ArrivalLoads loads;
  ASSERT_TRUE(Ask(loads, "cuda:0", "a", held.Load(), [] {}));
  ASSERT_TRUE(held.WaitBegun());
  ASSERT_TRUE(Ask(loads, "cuda:1", "a", ledger.Note("cuda:1's load"), ledger.Note("cuda:1's request")));
  EXPECT_TRUE(ledger.WaitFor(2)) << "cuda:1 waited for cuda:0's load";
  held.Release();
}

TEST(ArrivalLoads, AFullLaneOrLoadRefusesAndHoldsNothing) {
  HeldLoad held;
  Ledger ledger;
  ArrivalLoads loads(/*capacity=*/2);
  ASSERT_TRUE(Ask(loads, "cuda:0", "running", held.Load(), ledger.Note("running's request")));
  ASSERT_TRUE(held.WaitBegun());
  EXPECT_TRUE(Ask(loads, "cuda:0", "a", [] {}, ledger.Note("a's request")));
  EXPECT_TRUE(Ask(loads, "cuda:0", "b", [] {}, ledger.Note("b's request")));
  EXPECT_FALSE(Ask(loads, "cuda:0", "c", [] {}, ledger.Note("c's request"))) << "two loads wait already";
  EXPECT_TRUE(Ask(loads, "cuda:0", "a", [] {}, ledger.Note("a's second request"))) << "a waits already";
  EXPECT_FALSE(Ask(loads, "cuda:0", "a", [] {}, ledger.Note("a's third request"))) << "two requests wait for a";
  EXPECT_EQ(loads.Waiting("cuda:0"), 2u);
  // Another lane has room of its own.
  EXPECT_TRUE(Ask(loads, "cuda:1", "c", [] {}, ledger.Note("c's request on cuda:1")));
  held.Release();
  ASSERT_TRUE(ledger.WaitFor(5));
  std::vector<std::string> ran = ledger.ran();
  std::sort(ran.begin(), ran.end());
  EXPECT_EQ(ran, (std::vector<std::string>{"a's request", "a's second request", "b's request", "c's request on cuda:1",
                                           "running's request"}));
}

TEST(ArrivalLoads, StopHandsEveryHeldRequestOnOnceAndRunsNoWaitingLoad) {
  HeldLoad held;
  Ledger ledger;
  ArrivalLoads loads;
  ASSERT_TRUE(Ask(
      loads, "cuda:0", "running",
      [&] {
        held.Load()();
        ledger.Note("the running load ended")();
      },
      ledger.Note("running's request")));
  ASSERT_TRUE(held.WaitBegun());
  ASSERT_TRUE(Ask(loads, "cuda:0", "running", [] {}, ledger.Note("running's second request")));
  ASSERT_TRUE(Ask(loads, "cuda:0", "waiting", ledger.Note("the waiting load ran"), ledger.Note("waiting's request")));
  std::future<void> stopped = std::async(std::launch::async, [&] { loads.Stop(); });
  // Ask is refused from the moment Stop began; the waiting load's request
  // goes on at once, without its load.
  while (Ask(loads, "cuda:1", "probe", [] {}, [] {})) std::this_thread::yield();
  ASSERT_TRUE(ledger.WaitFor(1));
  EXPECT_EQ(ledger.ran(), std::vector<std::string>{"waiting's request"});
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout)
      << "Stop returned while a load was running";
  held.Release();
  ASSERT_EQ(stopped.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(ledger.ran(), (std::vector<std::string>{"waiting's request", "the running load ended", "running's request",
                                                    "running's second request"}));
  EXPECT_FALSE(Ask(loads, "cuda:0", "after", [] {}, ledger.Note("after")));
  EXPECT_EQ(loads.Waiting("cuda:0"), 0u);
  loads.Stop();  // again: nothing more runs
  EXPECT_EQ(ledger.ran().size(), 4u);
}

TEST(ArrivalLoads, ALoadOrRequestThatThrowsDoesNotEndItsLane) {
  Ledger ledger;
  ArrivalLoads loads;
  ASSERT_TRUE(
      Ask(loads, "cuda:0", "throws", [] { throw std::runtime_error("a load failed"); }, ledger.Note("its request")));
  ASSERT_TRUE(Ask(loads, "cuda:0", "next", [] {}, [] { throw std::runtime_error("a request's queueing failed"); }));
  ASSERT_TRUE(Ask(loads, "cuda:0", "last", [] {}, ledger.Note("last's request")));
  ASSERT_TRUE(ledger.WaitFor(2));
  EXPECT_EQ(ledger.ran(), (std::vector<std::string>{"its request", "last's request"}));
}

TEST(ArrivalLoads, EveryRequestHeldForALoadKeepsWhatItLeftUntilItLetsGo) {
  HeldLoad held;
  Ledger ledger;
  std::weak_ptr<void> left;
  Mutex mu;
  std::vector<ArrivalLoads::Hold> kept;
  auto keep = [&](const std::string& name) {
    return [&, name](ArrivalLoads::Hold hold) {
      EXPECT_NE(hold, nullptr) << name;
      {
        MutexLock lock(mu);
        kept.push_back(std::move(hold));
      }
      ledger.Note(name)();
    };
  };
  ArrivalLoads loads;
  ASSERT_TRUE(Ask(loads, "cuda:0", "first", held.Load(), [] {}));
  ASSERT_TRUE(held.WaitBegun());
  ASSERT_TRUE(loads.Ask(
      "cuda:0", "a",
      [&] {
        auto copy = std::make_shared<int>(7);
        left = copy;
        return ArrivalLoads::Hold(copy);
      },
      keep("one")));
  ASSERT_TRUE(loads.Ask("cuda:0", "a", [] { return ArrivalLoads::Hold(); }, keep("two")));
  held.Release();
  ASSERT_TRUE(ledger.WaitFor(2));
  ASSERT_TRUE(Ask(loads, "cuda:0", "settle", [] {}, ledger.Note("settled")));
  ASSERT_TRUE(ledger.WaitFor(3));
  {
    MutexLock lock(mu);
    ASSERT_EQ(kept.size(), 2u);
    EXPECT_EQ(kept[0], kept[1]) << "the two requests got different holds";
    EXPECT_FALSE(left.expired()) << "the lane let go of what the requests keep";
    kept.clear();
  }
  EXPECT_TRUE(left.expired()) << "the lane kept the hold after its requests let go";
}

#if defined(__linux__)
// A lane does work requests wait for: its thread runs under the normal CPU
// policy even when the thread that asked first (a gRPC thread) runs under
// SCHED_BATCH, which would make it wait for a running thread's turn to end
// each time it woke from a transfer (common/cpu_policy.h).
TEST(ArrivalLoads, ALanesThreadRunsUnderTheNormalCpuPolicy) {
  std::promise<int> policy;
  std::future<int> ran = policy.get_future();
  std::thread asker([&] {
    ASSERT_TRUE(SetThisThreadCpuPolicy(CpuPolicy::kBatch).ok());
    ArrivalLoads loads;
    ASSERT_TRUE(loads.Ask(
        "cuda:0", "m",
        [&]() -> ArrivalLoads::Hold {
          policy.set_value(sched_getscheduler(0));
          return nullptr;
        },
        [](ArrivalLoads::Hold) {}, 1000));
    // Stop before the lane took the load would drop it: wait for it.
    EXPECT_EQ(ran.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    loads.Stop();
  });
  asker.join();
  ASSERT_EQ(ran.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(ran.get(), SCHED_OTHER);
}
#endif

}  // namespace
}  // namespace infergate
