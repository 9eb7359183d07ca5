#include "scheduler/cache/model_cache.h"

#include <ATen/ops/ones.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "devices/device_failure.h"
#include "scheduler/loaders/torchscript/torchscript_model.h"
#include "tests/common/scratch_dir.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;

// A TorchScript file whose only parameter has `floats` elements.
std::string ModelFile(int64_t floats) {
  const fs::path dir = testing::ProcessScratchDir().path();
  fs::path path = dir / (std::to_string(floats) + ".pt");
  if (!fs::exists(path)) {
    torch::jit::Module m("M");
    m.register_parameter("w", at::ones({floats}), false);
    m.define("def forward(self, x):\n    return x * self.w[0]\n");
    m.save(path.string());
  }
  return path.string();
}

ModelCache::Loader Loader(int64_t floats, std::atomic<int>* calls = nullptr) {
  return [floats, calls](const AdmitBytes& admit) -> absl::StatusOr<std::shared_ptr<Servable>> {
    if (calls) calls->fetch_add(1);
    v1::ModelConfig config;
    config.set_name("m");
    absl::StatusOr<std::shared_ptr<TorchScriptModel>> model =
        TorchScriptModel::Load(ModelFile(floats), config, DeviceInfo{}, DType::kFloat32, admit);
    if (!model.ok()) return model.status();
    return std::shared_ptr<Servable>(*std::move(model));
  };
}

// What the cache holds on the cpu as a load starts and once its parameters
// are admitted (with them counted), seen from inside the loader.
struct AdmissionView {
  uint64_t resident_at_start = 0;
  uint64_t resident_when_admitted = 0;
};

// Loader(floats) that fills in `view` while it loads.
ModelCache::Loader Watched(const ModelCache& cache, int64_t floats, AdmissionView* view) {
  return [&cache, floats, view](const AdmitBytes& admit) -> absl::StatusOr<std::shared_ptr<Servable>> {
    const DeviceId cpu{DeviceKind::kCpu, 0};
    view->resident_at_start = cache.ResidentBytes(cpu);
    return Loader(floats)([&](uint64_t bytes) {
      absl::Status s = admit(bytes);
      view->resident_when_admitted = cache.ResidentBytes(cpu) + bytes;
      return s;
    });
  };
}

ModelKey Key(const std::string& name) { return {name, 1, {DeviceKind::kCpu, 0}, DType::kFloat32}; }

std::vector<std::string> ResidentNames(const ModelCache& cache) {
  std::vector<std::string> out;
  for (const ResidentModel& r : cache.Resident()) out.push_back(r.key.model);
  return out;
}

TEST(ModelCache, HundredConcurrentFirstRequestsCauseOneLoad) {
  ModelCache cache;
  std::atomic<int> calls{0};
  auto slow = [&](const AdmitBytes& admit) -> absl::StatusOr<std::shared_ptr<Servable>> {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return Loader(16, &calls)(admit);
  };
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 100; ++i) {
    threads.emplace_back([&] {
      if (cache.Acquire(Key("a"), slow).ok()) ok++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(ok.load(), 100);
}

TEST(ModelCache, FailedLoadsAreNotCached) {
  ModelCache cache;
  auto broken = [](const AdmitBytes&) -> absl::StatusOr<std::shared_ptr<Servable>> {
    return absl::InternalError("corrupt");
  };
  EXPECT_EQ(cache.Acquire(Key("a"), broken).status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(cache.Resident().empty());
  EXPECT_TRUE(cache.Acquire(Key("a"), Loader(16)).ok());
  EXPECT_EQ(ResidentNames(cache), (std::vector<std::string>{"a"}));
}

TEST(ModelCache, LeastRecentlyUsedIsEvictedUnderTheBudget) {
  ModelCache cache;
  const uint64_t model_bytes = 1000 * 4;
  cache.SetBudget({DeviceKind::kCpu, 0}, 2 * model_bytes + 100);  // room for two
  std::vector<std::string> evicted;
  cache.SetEvictionListener([&](const ModelKey& key, uint64_t, EvictionReason) { evicted.push_back(key.model); });
  ASSERT_TRUE(cache.Acquire(Key("a"), Loader(1000)).ok());
  ASSERT_TRUE(cache.Acquire(Key("b"), Loader(1000)).ok());
  ASSERT_TRUE(cache.Acquire(Key("a"), Loader(1000)).ok());  // a is now more recent than b
  ASSERT_TRUE(cache.Acquire(Key("c"), Loader(1000)).ok());
  EXPECT_EQ(ResidentNames(cache), (std::vector<std::string>{"a", "c"}));
  EXPECT_LE(cache.ResidentBytes({DeviceKind::kCpu, 0}), 2 * model_bytes + 100);
  EXPECT_EQ(evicted, (std::vector<std::string>{"b"}));                                             // reported once
  ASSERT_TRUE(cache.Acquire(Key("d"), Loader(1000), false, Footprint{4000, 0, "expected"}).ok());  // room made up front
  EXPECT_EQ(evicted, (std::vector<std::string>{"b", "a"}));
}

// Bytes held outside the copies (host copies of weights) count against the
// budget as a copy does: idle copies are evicted to make room for them, a
// copy in use is not and the hold is refused naming what asked, and while
// they are held a load finds less room.
TEST(ModelCache, BytesHeldOutsideTheCopiesCountAgainstTheBudget) {
  ModelCache cache;
  const DeviceId cpu{DeviceKind::kCpu, 0};
  const uint64_t model_bytes = 1000 * 4;
  cache.SetBudget(cpu, 2 * model_bytes + 100);
  std::vector<std::string> evicted;
  cache.SetEvictionListener([&](const ModelKey& key, uint64_t, EvictionReason) { evicted.push_back(key.model); });
  ASSERT_TRUE(cache.Acquire(Key("a"), Loader(1000)).ok());
  ASSERT_TRUE(cache.Acquire(Key("b"), Loader(1000)).ok());
  ASSERT_TRUE(cache.HoldOutsideCopies(cpu, model_bytes, "a host copy").ok());
  EXPECT_EQ(evicted, (std::vector<std::string>{"a"}));  // the least recently used idle copy
  EXPECT_EQ(cache.HeldOutsideCopies(cpu), model_bytes);
  {
    absl::StatusOr<ModelCache::Lease> in_use = cache.Acquire(Key("b"), Loader(1000));
    ASSERT_TRUE(in_use.ok());
    absl::Status refused = cache.HoldOutsideCopies(cpu, model_bytes, "another host copy");
    EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
    EXPECT_NE(refused.message().find("another host copy"), std::string::npos) << refused;
    EXPECT_EQ(cache.HeldOutsideCopies(cpu), model_bytes);  // unchanged by the refusal
    // No room for a second model beside b and the held bytes while b is in use.
    EXPECT_TRUE(absl::IsResourceExhausted(cache.Acquire(Key("c"), Loader(1000)).status()));
  }
  cache.ReleaseOutsideCopies(cpu, model_bytes);
  EXPECT_EQ(cache.HeldOutsideCopies(cpu), 0u);
  EXPECT_TRUE(cache.Acquire(Key("c"), Loader(1000)).ok());
  EXPECT_EQ(ResidentNames(cache), (std::vector<std::string>{"b", "c"}));
}

// Apple silicon's CPU and MPS share one memory: with MPS drawing on the
// CPU's budget, a model on either counts against one budget, and a load on
// one evicts the least recently used idle model of both.
TEST(ModelCache, DevicesSharingOneMemoryShareOneBudget) {
  ModelCache cache;
  const DeviceId cpu{DeviceKind::kCpu, 0}, mps{DeviceKind::kMps, 0};
  const uint64_t model_bytes = 1000 * 4;
  cache.SetBudget(cpu, 2 * model_bytes + 100);  // room for two, on both together
  cache.ShareBudget(mps, cpu);
  EXPECT_EQ(cache.Budget(mps), 2 * model_bytes + 100);
  auto on = [](const std::string& name, const DeviceId& d) { return ModelKey{name, 1, d, DType::kFloat32}; };
  ASSERT_TRUE(cache.Acquire(on("a", cpu), Loader(1000)).ok());
  ASSERT_TRUE(cache.Acquire(on("b", mps), Loader(1000)).ok());
  ASSERT_TRUE(cache.Acquire(on("c", mps), Loader(1000)).ok());  // evicts a, on the other device
  EXPECT_EQ(ResidentNames(cache), (std::vector<std::string>{"b", "c"}));
  EXPECT_LE(cache.ResidentBytes(cpu) + cache.ResidentBytes(mps), 2 * model_bytes + 100);
  // Unshared devices keep budgets of their own.
  const DeviceId cuda{DeviceKind::kCuda, 0};
  cache.SetBudget(cuda, model_bytes + 100);
  ASSERT_TRUE(cache.Acquire(on("d", cuda), Loader(1000)).ok());
  EXPECT_EQ(ResidentNames(cache), (std::vector<std::string>{"b", "c", "d"}));
}

// The hot path: a resident copy is leased without a loader; an absent or
// still-loading one is not, and a failed load leaves nothing to lease.
TEST(ModelCache, AcquireResidentLeasesOnlyALoadedCopyAndCountsAsAUse) {
  ModelCache cache;
  cache.SetBudget({DeviceKind::kCpu, 0}, 2 * 4000 + 100);  // room for two
  EXPECT_FALSE(cache.AcquireResident(Key("a")).has_value());
  ModelCache::Loader broken = [](const AdmitBytes&) -> absl::StatusOr<std::shared_ptr<Servable>> {
    return absl::InternalError("broken");
  };
  EXPECT_FALSE(cache.Acquire(Key("a"), broken).ok());
  EXPECT_FALSE(cache.AcquireResident(Key("a")).has_value());
  ASSERT_TRUE(cache.Acquire(Key("a"), Loader(1000)).ok());
  ASSERT_TRUE(cache.Acquire(Key("b"), Loader(1000)).ok());
  std::optional<ModelCache::Lease> a = cache.AcquireResident(Key("a"));
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(a->loaded_now());
  EXPECT_NE(a->operator->(), nullptr);
  a.reset();
  // "a" was used after "b", so the third model evicts "b".
  ASSERT_TRUE(cache.Acquire(Key("c"), Loader(1000)).ok());
  EXPECT_EQ(ResidentNames(cache), (std::vector<std::string>{"a", "c"}));
  // A copy still loading is not leased: the caller goes through Acquire and waits for it.
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  std::thread loading([&] {
    ModelCache::Loader slow = [&](const AdmitBytes& admit) {
      started.store(true);
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return Loader(10)(admit);
    };
    EXPECT_TRUE(cache.Acquire(Key("d"), slow).ok());
  });
  while (!started.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(cache.AcquireResident(Key("d")).has_value());
  release.store(true);
  loading.join();
  EXPECT_TRUE(cache.AcquireResident(Key("d")).has_value());
}

TEST(ModelCache, PinnedAndInFlightModelsAreNeverEvictedAndLeaveNoRoomForALoad) {
  ModelCache cache;
  cache.SetBudget({DeviceKind::kCpu, 0}, 2 * 4000 + 100);
  ASSERT_TRUE(cache.Acquire(Key("pinned"), Loader(1000), /*pinned=*/true).ok());
  auto busy = cache.Acquire(Key("busy"), Loader(1000));  // lease held: in flight
  ASSERT_TRUE(busy.ok());
  // Nothing can be evicted, so the load is refused before its parameters
  // reach the device (an out-of-memory failure: the scheduler retries once
  // after evicting, then falls back), and the budget holds.
  absl::Status refused = cache.Acquire(Key("new"), Loader(1000)).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(DeviceFailureOf(refused).has_value());
  EXPECT_EQ(DeviceFailureOf(refused)->kind, DeviceFailure::kOutOfMemory);
  EXPECT_NE(refused.message().find("in use, pinned or loading hold 7.81 KiB of the 7.91 KiB budget"),
            absl::string_view::npos)
      << refused;
  EXPECT_LE(cache.ResidentBytes({DeviceKind::kCpu, 0}), 2 * 4000 + 100u);
  std::vector<std::string> names = ResidentNames(cache);
  EXPECT_EQ(names.size(), 2u);
  EXPECT_NE(std::find(names.begin(), names.end(), "pinned"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "busy"), names.end());
  // Once the busy lease ends it is the LRU candidate for the next load.
  *busy = ModelCache::Lease();
  ASSERT_TRUE(cache.Acquire(Key("newer"), Loader(1000)).ok());
  names = ResidentNames(cache);
  EXPECT_EQ(std::find(names.begin(), names.end(), "busy"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "pinned"), names.end());
}

TEST(ModelCache, ModelLargerThanTheBudgetIsResourceExhausted) {
  ModelCache cache;
  cache.SetBudget({DeviceKind::kCpu, 0}, 1000);
  auto lease = cache.Acquire(Key("big"), Loader(1000));
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(lease.status().message().find("cache budget"), absl::string_view::npos);
  EXPECT_TRUE(cache.Resident().empty());
}

// Room is made before the loader runs (for the expected footprint) and
// before it places its parameters (for their exact size): at no point of a
// load do the models resident on the device and the one loading exceed the
// budget. A cache that loaded first and evicted afterwards fails here.
TEST(ModelCache, RoomIsMadeBeforeTheLoadSoTheBudgetIsNeverExceeded) {
  ModelCache cache;
  const DeviceId cpu{DeviceKind::kCpu, 0};
  const uint64_t budget = 3 * 4000 + 100;  // room for three of the 1000-float models
  cache.SetBudget(cpu, budget);
  for (int i = 0; i < 8; ++i) {
    std::string name = absl::StrCat("m", i);
    AdmissionView view;
    Footprint expected{4000, 0, "test"};
    ASSERT_TRUE(cache.Acquire(Key(name), Watched(cache, 1000, &view), false, expected).ok()) << name;
    EXPECT_LE(view.resident_at_start + expected.total(), budget) << name;
    EXPECT_LE(view.resident_when_admitted, budget) << name;
    EXPECT_LE(cache.ResidentBytes(cpu), budget) << name;
  }
  EXPECT_EQ(cache.Resident().size(), 3u);
}

// An estimate that was too low is corrected before the parameters are
// placed: more models are evicted then, and the budget still holds.
TEST(ModelCache, ALowEstimateIsCorrectedBeforeTheParametersArePlaced) {
  ModelCache cache;
  const DeviceId cpu{DeviceKind::kCpu, 0};
  cache.SetBudget(cpu, 12100);
  ASSERT_TRUE(cache.Acquire(Key("a"), Loader(1000)).ok());
  ASSERT_TRUE(cache.Acquire(Key("b"), Loader(1000)).ok());
  AdmissionView view;
  ASSERT_TRUE(cache.Acquire(Key("big"), Watched(cache, 2000, &view), false, Footprint{100, 0, "a wrong guess"}).ok());
  EXPECT_LE(view.resident_when_admitted, 12100u);
  EXPECT_EQ(ResidentNames(cache), (std::vector<std::string>{"b", "big"}));
}

// A model whose expected footprint exceeds the whole budget is refused up
// front, with the figures, and its file is never read.
TEST(ModelCache, AModelThatCanNeverFitIsRefusedWithTheNumbersAndNeverLoaded) {
  ModelCache cache;
  const DeviceId cpu{DeviceKind::kCpu, 0};
  cache.SetBudget(cpu, 3u << 20);
  std::atomic<int> loads{0};
  Footprint expected{4u << 20, 1u << 20, "learned from an earlier load"};
  absl::Status refused = cache.Acquire(Key("huge"), Loader(16, &loads), false, expected).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(DeviceFailureOf(refused).has_value());
  EXPECT_EQ(DeviceFailureOf(refused)->kind, DeviceFailure::kTooLarge);
  for (const char* figure : {"needs 5.00 MiB (5242880 bytes, learned from an earlier load)",
                             "model cache budget of 3.00 MiB (3145728 bytes)", "can never be loaded there"}) {
    EXPECT_NE(refused.message().find(figure), absl::string_view::npos) << figure << " in " << refused;
  }
  EXPECT_EQ(loads.load(), 0);
  EXPECT_TRUE(cache.Resident().empty());
  // Refusing is not an eviction: nothing else on the device was touched.
  ASSERT_TRUE(cache.Acquire(Key("small"), Loader(16)).ok());
  EXPECT_EQ(cache.Acquire(Key("huge"), Loader(16, &loads), false, expected).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ResidentNames(cache), (std::vector<std::string>{"small"}));
}

// A measured activation peak counts from then on: idle models make room for it.
TEST(ModelCache, AnActivationPeakCountsAgainstTheBudget) {
  ModelCache cache;
  const DeviceId cpu{DeviceKind::kCpu, 0};
  cache.SetBudget(cpu, 10000);
  ASSERT_TRUE(cache.Acquire(Key("a"), Loader(1000)).ok());
  ASSERT_TRUE(cache.Acquire(Key("b"), Loader(1000)).ok());
  cache.SetActivationBytes(Key("b"), 5000);
  EXPECT_EQ(ResidentNames(cache), (std::vector<std::string>{"b"}));
  EXPECT_EQ(cache.ResidentBytes(cpu), 9000u);
  // Grown past the whole budget, it leaves the device.
  cache.SetActivationBytes(Key("b"), 7000);
  EXPECT_TRUE(cache.Resident().empty());
}

TEST(ModelCache, EvictIdleKeepsTheModelInUse) {
  ModelCache cache;
  ASSERT_TRUE(cache.Acquire(Key("a"), Loader(16)).ok());
  ASSERT_TRUE(cache.Acquire(Key("b"), Loader(16)).ok());
  ModelKey keep = Key("b");
  EXPECT_EQ(cache.EvictIdle({DeviceKind::kCpu, 0}, &keep, EvictionReason::kOom), 1u);
  EXPECT_EQ(ResidentNames(cache), (std::vector<std::string>{"b"}));
}

TEST(ModelCache, UnloadDropsModelsInUseWhoseLeasesFinishOnTheOldCopy) {
  ModelCache cache;
  std::atomic<int> loads{0};
  auto busy = cache.Acquire(Key("busy"), Loader(16, &loads));
  ASSERT_TRUE(busy.ok());
  ASSERT_TRUE(cache.Acquire(Key("pinned"), Loader(16), /*pinned=*/true).ok());
  ASSERT_TRUE(cache.Acquire(Key("other"), Loader(16)).ok());
  EXPECT_EQ(cache.Unload([](const ModelKey& k) { return k.model != "other"; }), 2u);
  EXPECT_EQ(ResidentNames(cache), (std::vector<std::string>{"other"}));
  // The request in flight still holds a usable model.
  EXPECT_EQ((*busy)->resident_bytes(), 16u * 4);
  // The next request loads a fresh copy; ending the old lease later is harmless.
  auto again = cache.Acquire(Key("busy"), Loader(16, &loads));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(loads.load(), 2);
  *busy = ModelCache::Lease();
  EXPECT_TRUE(cache.IsResident(Key("busy")));
  EXPECT_EQ(cache.Unload([](const ModelKey&) { return true; }), 2u);
  EXPECT_TRUE(cache.Resident().empty());
}

}  // namespace
}  // namespace infergate
