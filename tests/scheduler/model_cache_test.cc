#include "scheduler/model_cache.h"

#include <ATen/ops/ones.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "scheduler/loaded_model.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;

// A TorchScript file whose only parameter has `floats` elements.
std::string ModelFile(int64_t floats) {
  static fs::path dir = fs::temp_directory_path() / ("ig_cache_" + std::to_string(::getpid()));
  fs::create_directories(dir);
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
  return [floats, calls]() -> absl::StatusOr<std::shared_ptr<Servable>> {
    if (calls) calls->fetch_add(1);
    v1::ModelConfig config;
    config.set_name("m");
    absl::StatusOr<std::shared_ptr<LoadedModel>> model =
        LoadedModel::Load(ModelFile(floats), config, DeviceInfo{}, DType::kFloat32);
    if (!model.ok()) return model.status();
    return std::shared_ptr<Servable>(*std::move(model));
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
  auto slow = [&]() -> absl::StatusOr<std::shared_ptr<Servable>> {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return Loader(16, &calls)();
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
  auto broken = []() -> absl::StatusOr<std::shared_ptr<Servable>> { return absl::InternalError("corrupt"); };
  EXPECT_EQ(cache.Acquire(Key("a"), broken).status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(cache.Resident().empty());
  EXPECT_TRUE(cache.Acquire(Key("a"), Loader(16)).ok());
  EXPECT_EQ(ResidentNames(cache), (std::vector<std::string>{"a"}));
}

TEST(ModelCache, LeastRecentlyUsedIsEvictedUnderTheBudget) {
  ModelCache cache;
  const uint64_t model_bytes = 1000 * 4;
  cache.SetBudget({DeviceKind::kCpu, 0}, 2 * model_bytes + 100);  // room for two
  ASSERT_TRUE(cache.Acquire(Key("a"), Loader(1000)).ok());
  ASSERT_TRUE(cache.Acquire(Key("b"), Loader(1000)).ok());
  ASSERT_TRUE(cache.Acquire(Key("a"), Loader(1000)).ok());  // a is now more recent than b
  ASSERT_TRUE(cache.Acquire(Key("c"), Loader(1000)).ok());
  EXPECT_EQ(ResidentNames(cache), (std::vector<std::string>{"a", "c"}));
  EXPECT_LE(cache.ResidentBytes({DeviceKind::kCpu, 0}), 2 * model_bytes + 100);
}

TEST(ModelCache, PinnedAndInFlightModelsAreNeverEvicted) {
  ModelCache cache;
  cache.SetBudget({DeviceKind::kCpu, 0}, 2 * 4000 + 100);
  ASSERT_TRUE(cache.Acquire(Key("pinned"), Loader(1000), /*pinned=*/true).ok());
  auto busy = cache.Acquire(Key("busy"), Loader(1000));  // lease held: in flight
  ASSERT_TRUE(busy.ok());
  ASSERT_TRUE(cache.Acquire(Key("new"), Loader(1000)).ok());
  // Nothing could be evicted: over budget, but neither pinned nor busy went.
  std::vector<std::string> names = ResidentNames(cache);
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

TEST(ModelCache, EvictIdleKeepsTheModelInUse) {
  ModelCache cache;
  ASSERT_TRUE(cache.Acquire(Key("a"), Loader(16)).ok());
  ASSERT_TRUE(cache.Acquire(Key("b"), Loader(16)).ok());
  ModelKey keep = Key("b");
  EXPECT_EQ(cache.EvictIdle({DeviceKind::kCpu, 0}, &keep, "test"), 1u);
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
