// The placement controller over fake hooks: a promotion carried out, the
// displaced model given a CPU copy before its eviction, a failed move not
// retried until its back-off passes, learned load times over estimates, an
// eviction by a load noted as a demotion, staged copies left in the staging
// room, copies over the budget trimmed (loaded ones first), and passes on
// its own thread that Stop ends, under the normal CPU policy.
#include "scheduler/routing/placement_controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/cpu_policy.h"
#include "common/mutex.h"

#if defined(__linux__)
#include <sched.h>
#endif

namespace infergate {
namespace {

using std::chrono::milliseconds;
constexpr uint64_t kMebibyte = uint64_t{1} << 20;
const DeviceId kCudaZero{DeviceKind::kCuda, 0};

bool WaitFor(const std::function<bool()>& done) {
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30); std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(milliseconds(1))) {
    if (done()) return true;
  }
  return done();
}

// A fake accelerator: the models the hooks report and what was done, in order.
struct Fake {
  Mutex mu;
  std::vector<MoveCandidate> models ABSL_GUARDED_BY(mu);
  uint64_t budget = 800 * kMebibyte;
  uint64_t device_budget = 0;  // 0: the policy's budget is the device's (no staging share)
  std::vector<std::string> calls ABSL_GUARDED_BY(mu);
  absl::Status promote_result ABSL_GUARDED_BY(mu);
  absl::Status evict_result ABSL_GUARDED_BY(mu);
  std::thread::id ran_on ABSL_GUARDED_BY(mu);

  PlacementController::Hooks Hooks() {
    PlacementController::Hooks h;
    h.accelerators = [] { return std::vector<DeviceId>{kCudaZero}; };
    h.inputs = [this](const DeviceId&) {
      MutexLock lock(mu);
      ran_on = std::this_thread::get_id();
      MoveInputs in;
      in.budget_bytes = budget;
      in.device_budget_bytes = device_budget;
      in.models = models;
      return in;
    };
    h.keep_on_cpu = [this](const std::string& m) {
      MutexLock lock(mu);
      calls.push_back("cpu " + m);
      return absl::OkStatus();
    };
    // The fake's state follows what was done, as the cache's would.
    h.evict = [this](const std::string& m, const DeviceId&) {
      MutexLock lock(mu);
      calls.push_back("evict " + m);
      if (evict_result.ok()) SetResident(m, false);
      return evict_result;
    };
    h.promote = [this](const std::string& m, const DeviceId&) {
      MutexLock lock(mu);
      calls.push_back("promote " + m);
      if (promote_result.ok()) SetResident(m, true);
      return promote_result;
    };
    return h;
  }
  void SetResident(const std::string& name, bool resident) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (MoveCandidate& m : models) {
      if (m.model == name) m.resident = resident;
    }
  }
  std::vector<std::string> Calls() {
    MutexLock lock(mu);
    return calls;
  }
  void Set(std::vector<MoveCandidate> m) {
    MutexLock lock(mu);
    models = std::move(m);
    calls.clear();
  }
};

// demand (req/s), ms there, ms elsewhere, transfer ms, MiB, resident.
MoveCandidate Candidate(const std::string& name, double rps, double transfer_ms, uint64_t mib, bool resident = false) {
  return {name, rps, 1000, 20000, transfer_ms * 1000, mib * kMebibyte, resident, 60};
}

PlacementController::Options Quick() {
  PlacementController::Options o;
  o.period = milliseconds(20);
  o.min_gap = milliseconds(1);
  o.retry_after = milliseconds(300);
  return o;
}

TEST(PlacementController, APromotionDisplacesTheSmallestGainWhichGetsACpuCopyBeforeItsEviction) {
  Fake fake;
  PlacementController pc(fake.Hooks(), Quick());
  fake.Set(
      {Candidate("hot", 50, 100, 400), Candidate("cold", 1, 100, 400, true), Candidate("warm", 20, 100, 400, true)});
  pc.RunPassForTest();
  EXPECT_EQ(fake.Calls(), (std::vector<std::string>{"cpu cold", "evict cold", "promote hot"}));
  EXPECT_TRUE(pc.Demoted("cold", kCudaZero));
  EXPECT_FALSE(pc.Demoted("hot", kCudaZero));
  EXPECT_FALSE(pc.Demoted("cold", DeviceId{DeviceKind::kCuda, 1})) << "demoted from another device";
  EXPECT_EQ(pc.counts().promoted, 1u);
  EXPECT_EQ(pc.counts().demoted, 1u);

  // Back on the accelerator (the hooks report it resident): no longer demoted.
  fake.Set({Candidate("hot", 50, 100, 400, true), Candidate("cold", 0, 100, 400, true)});
  pc.RunPassForTest();
  EXPECT_FALSE(pc.Demoted("cold", kCudaZero));
  EXPECT_TRUE(fake.Calls().empty()) << "nothing left to move";
}

TEST(PlacementController, APassFollowsAShiftWithSeveralPromotionsEachOnTheStateTheLastLeft) {
  Fake fake;
  PlacementController pc(fake.Hooks(), Quick());
  // Room for two of 100 MiB; two new hot models, two idle residents.
  fake.budget = 200 * kMebibyte;
  fake.Set({Candidate("new1", 50, 10, 100), Candidate("new2", 40, 10, 100), Candidate("old1", 0, 10, 100, true),
            Candidate("old2", 0, 10, 100, true)});
  pc.RunPassForTest();
  EXPECT_EQ(fake.Calls(), (std::vector<std::string>{"cpu old1", "evict old1", "promote new1", "cpu old2", "evict old2",
                                                    "promote new2"}));
  EXPECT_EQ(pc.counts().promoted, 2u);
}

// The staging share: a copy a request loaded (not this controller) is
// staged. It holds none of the policy's budget and stays in the rest of the
// device's however little it gains, until a load needs its room; a
// promotion takes the policy's room from the copies this controller placed.
TEST(PlacementController, StagedCopiesStayAndAPromotionTakesThePolicysRoomFromPlacedOnes) {
  Fake fake;
  PlacementController pc(fake.Hooks(), Quick());
  fake.budget = 400 * kMebibyte;
  fake.device_budget = 800 * kMebibyte;
  fake.Set({Candidate("placed", 50, 100, 400)});
  pc.RunPassForTest();
  ASSERT_EQ(fake.Calls(), std::vector<std::string>{"promote placed"});

  MoveCandidate placed = Candidate("placed", 50, 100, 400, true);
  placed.resident_for_s = 60;
  MoveCandidate staged = Candidate("staged", 1, 100, 400, true);
  staged.resident_for_s = 0.5;
  fake.Set({placed, staged});
  pc.RunPassForTest();
  EXPECT_EQ(fake.Calls(), std::vector<std::string>{}) << "the staged copy stays in the staging room";

  fake.Set({placed, staged, Candidate("hot", 500, 100, 400)});
  pc.RunPassForTest();
  EXPECT_EQ(fake.Calls(), (std::vector<std::string>{"cpu placed", "evict placed", "promote hot"}))
      << "the policy's room comes from its own copy; the staged one (gaining less) fills the rest";
  EXPECT_TRUE(pc.Demoted("placed", kCudaZero));
  EXPECT_FALSE(pc.Demoted("staged", kCudaZero));
}

// Without a staging share every copy counts in the one budget: over it, a
// copy a request loaded goes whatever its residence, while one the
// controller placed keeps its minimum residence and once settled gives
// way to a loaded copy that gains more.
TEST(PlacementController, WithoutAStagingShareCopiesOverTheBudgetAreTrimmedLoadedOnesFirst) {
  Fake fake;
  PlacementController pc(fake.Hooks(), Quick());
  fake.budget = 400 * kMebibyte;
  fake.Set({Candidate("placed", 50, 100, 400)});
  pc.RunPassForTest();
  ASSERT_EQ(fake.Calls(), std::vector<std::string>{"promote placed"});

  MoveCandidate placed = Candidate("placed", 50, 100, 400, true);
  placed.resident_for_s = 1;  // within the minimum residence (5 s)
  MoveCandidate staged = Candidate("staged", 100, 100, 400, true);
  staged.resident_for_s = 0.5;
  fake.Set({placed, staged});
  pc.RunPassForTest();
  EXPECT_EQ(fake.Calls(), (std::vector<std::string>{"cpu staged", "evict staged"}))
      << "the placed copy keeps its minimum residence";
  EXPECT_TRUE(pc.Demoted("staged", kCudaZero));

  placed.resident_for_s = 60;  // settled: the loaded copy gains more and is kept in its place
  fake.Set({placed, staged});
  pc.RunPassForTest();
  EXPECT_EQ(fake.Calls(), (std::vector<std::string>{"cpu placed", "evict placed"}));
  EXPECT_EQ(pc.counts().promoted, 1u);
  EXPECT_EQ(pc.counts().demoted, 2u);
}

TEST(PlacementController, AModelInUseIsNotEvictedAndThePromotionWaits) {
  Fake fake;
  {
    MutexLock lock(fake.mu);
    fake.evict_result = absl::FailedPreconditionError("in use");
  }
  PlacementController pc(fake.Hooks(), Quick());
  fake.Set(
      {Candidate("hot", 50, 100, 400), Candidate("cold", 1, 100, 400, true), Candidate("warm", 20, 100, 400, true)});
  pc.RunPassForTest();
  EXPECT_EQ(fake.Calls(), (std::vector<std::string>{"cpu cold", "evict cold"}));
  EXPECT_FALSE(pc.Demoted("cold", kCudaZero));
  EXPECT_EQ(pc.counts().promoted, 0u);
}

TEST(PlacementController, AFailedMoveIsNotTriedAgainUntilItsBackOffPasses) {
  Fake fake;
  {
    MutexLock lock(fake.mu);
    fake.promote_result = absl::ResourceExhaustedError("does not fit");
  }
  PlacementController pc(fake.Hooks(), Quick());
  fake.Set({Candidate("big", 50, 100, 400)});
  pc.RunPassForTest();
  EXPECT_EQ(fake.Calls(), std::vector<std::string>{"promote big"});
  EXPECT_EQ(pc.counts().failed, 1u);
  fake.Set({Candidate("big", 50, 100, 400)});
  pc.RunPassForTest();
  EXPECT_TRUE(fake.Calls().empty()) << "retried at once after failing";
  std::this_thread::sleep_for(milliseconds(350));
  pc.RunPassForTest();
  EXPECT_EQ(fake.Calls(), std::vector<std::string>{"promote big"});
}

TEST(PlacementController, ALearnedLoadTimeReplacesTheEstimate) {
  Fake fake;
  PlacementController pc(fake.Hooks(), Quick());
  // 10 req/s x 10 s x 19 ms = 1.9 s of gain against a 50 ms estimate: moves.
  fake.Set({Candidate("a", 10, 50, 100)});
  pc.RecordLoadTime("a", kCudaZero, LoadSource::kFile, 5e6);  // but its loads there took 5 s
  pc.RunPassForTest();
  EXPECT_TRUE(fake.Calls().empty()) << "moved although a move costs more than it gains";
  EXPECT_EQ(pc.LoadTime("a", kCudaZero, LoadSource::kFile), 5e6);
  pc.RecordLoadTime("a", kCudaZero, LoadSource::kFile, 20e3);
  pc.RunPassForTest();
  EXPECT_EQ(fake.Calls(), std::vector<std::string>{"promote a"});
}

TEST(PlacementController, ALoadTimeIsLearnedForWhereTheLoadStarted) {
  // 10 req/s x 10 s x 19 ms = 1.9 s of gain; its next load starts from a
  // host copy, estimated at 50 ms.
  MoveCandidate a = Candidate("a", 10, 50, 100);
  a.next_load = LoadSource::kHostCopy;
  {
    Fake fake;
    PlacementController pc(fake.Hooks(), Quick());
    pc.RecordLoadTime("a", kCudaZero, LoadSource::kFile, 5e6);  // its first load read the file: 5 s
    EXPECT_EQ(pc.LoadTime("a", kCudaZero, LoadSource::kHostCopy), std::nullopt);
    fake.Set({a});
    pc.RunPassForTest();
    EXPECT_EQ(fake.Calls(), std::vector<std::string>{"promote a"}) << "weighed by the file's load time";
  }
  Fake fake;
  PlacementController pc(fake.Hooks(), Quick());
  pc.RecordLoadTime("a", kCudaZero, LoadSource::kFile, 20e3);
  pc.RecordLoadTime("a", kCudaZero, LoadSource::kHostCopy, 5e6);  // a move from the host copy took 5 s
  fake.Set({a});
  pc.RunPassForTest();
  EXPECT_TRUE(fake.Calls().empty()) << "moved although a move from the host copy costs more than it gains";
  EXPECT_EQ(pc.LoadTime("a", kCudaZero, LoadSource::kFile), 20e3) << "the file's time is kept apart";
  EXPECT_EQ(pc.LoadTime("a", kCudaZero, LoadSource::kHostCopy), 5e6);
}

TEST(PlacementController, AModelEvictedByALoadIsDemotedAndGetsACpuCopy) {
  Fake fake;
  PlacementController pc(fake.Hooks(), Quick());
  pc.NoteEvicted("lru", kCudaZero);
  EXPECT_TRUE(pc.Demoted("lru", kCudaZero));
  fake.Set({});
  pc.RunPassForTest();
  EXPECT_EQ(fake.Calls(), std::vector<std::string>{"cpu lru"});
  EXPECT_EQ(pc.counts().kept_on_cpu, 1u);
  fake.Set({});
  pc.RunPassForTest();
  EXPECT_TRUE(fake.Calls().empty()) << "a CPU copy asked for twice";
}

TEST(PlacementController, PassesRunOnItsOwnThreadWhenWokenAndStopEndsThem) {
  Fake fake;
  PlacementController::Options o = Quick();
  o.period = std::chrono::seconds(3600);  // only Wake starts a pass
  PlacementController pc(fake.Hooks(), o);
  fake.Set({Candidate("a", 10, 1, 100)});
  pc.Start();
  pc.Wake();
  ASSERT_TRUE(WaitFor([&] { return pc.counts().promoted == 1; }));
  {
    MutexLock lock(fake.mu);
    EXPECT_NE(fake.ran_on, std::this_thread::get_id());
  }
  pc.Stop();
  const uint64_t passes = pc.counts().passes;
  pc.Wake();
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(pc.counts().passes, passes) << "a pass ran after Stop";
}

#if defined(__linux__)
// Its promotions are moves requests may wait for: its thread runs under the
// normal CPU policy even when the thread that started it (the server's
// main thread) runs under SCHED_BATCH, which would make each move's wake from a transfer
// wait for a running thread's turn to end (common/cpu_policy.h).
TEST(PlacementController, ItsThreadRunsUnderTheNormalCpuPolicy) {
  Fake fake;
  fake.Set({Candidate("a", 10, 1, 100)});
  std::atomic<int> policy{-1};
  PlacementController::Hooks hooks = fake.Hooks();
  hooks.promote = [inner = hooks.promote, &policy](const std::string& m, const DeviceId& d) {
    policy = sched_getscheduler(0);
    return inner(m, d);
  };
  PlacementController pc(hooks, Quick());
  std::thread starter([&] {
    ASSERT_TRUE(SetThisThreadCpuPolicy(CpuPolicy::kBatch).ok());
    pc.Start();
  });
  starter.join();
  pc.Wake();
  ASSERT_TRUE(WaitFor([&] { return pc.counts().promoted == 1; }));
  pc.Stop();
  EXPECT_EQ(policy.load(), SCHED_OTHER);
}
#endif

}  // namespace
}  // namespace infergate
