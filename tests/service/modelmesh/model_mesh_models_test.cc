#include "service/modelmesh/model_mesh_models.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <set>
#include <thread>

namespace infergate {
namespace {

// A core stand-in: loads block until released, what serves is a set.
class FakeCore {
 public:
  ModelMeshModels::Backend Backend() {
    return {[this](const std::string& id, const std::string& folder) -> absl::Status {
              loads_started_.fetch_add(1);
              std::unique_lock<std::mutex> lock(mu_);
              released_.wait(lock, [&] { return !hold_loads_; });
              if (folder == "broken") {
                served_.insert(id);  // a failed load may leave an entry, as the core's does
                return absl::FailedPreconditionError("does not load");
              }
              served_.insert(id);
              return absl::OkStatus();
            },
            [this](const std::string& id) {
              std::lock_guard<std::mutex> lock(mu_);
              served_.erase(id);
              forgets_++;
            },
            [this](const std::string& id) -> uint64_t {
              std::lock_guard<std::mutex> lock(mu_);
              return served_.count(id) ? 1000 + id.size() : 0;
            }};
  }
  void HoldLoads() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_loads_ = true;
  }
  void ReleaseLoads() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      hold_loads_ = false;
    }
    released_.notify_all();
  }
  void WaitForLoads(int n) {
    while (loads_started_.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  bool Serves(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return served_.count(id) > 0;
  }
  int forgets() {
    std::lock_guard<std::mutex> lock(mu_);
    return forgets_;
  }

 private:
  std::mutex mu_;
  std::condition_variable released_;
  bool hold_loads_ = false;
  std::set<std::string> served_;
  int forgets_ = 0;
  std::atomic<int> loads_started_{0};
};

const auto kNotCancelled = [] { return false; };

TEST(ModelMeshModelsTest, LoadAnswersTheResidentBytesAndAgainTheSame) {
  FakeCore core;
  ModelMeshModels models(core.Backend());
  EXPECT_EQ(*models.Load("m", "/f", kNotCancelled), 1001u);
  EXPECT_EQ(*models.Load("m", "/f", kNotCancelled), 1001u);
  EXPECT_EQ(*models.Size("m"), 1001u);
  EXPECT_EQ(models.Loaded(), std::vector<std::string>{"m"});
  models.Unload("m");
  EXPECT_FALSE(core.Serves("m"));
  EXPECT_EQ(models.Size("m").status().code(), absl::StatusCode::kNotFound);
  models.Unload("m");      // gone already
  models.Unload("never");  // never loaded
  EXPECT_EQ(core.forgets(), 1);
}

TEST(ModelMeshModelsTest, AFailedLoadLeavesNothing) {
  FakeCore core;
  ModelMeshModels models(core.Backend());
  absl::StatusOr<uint64_t> s = models.Load("b", "broken", kNotCancelled);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(core.Serves("b"));
  EXPECT_TRUE(models.Loaded().empty());
  EXPECT_EQ(models.Size("b").status().code(), absl::StatusCode::kNotFound);
}

TEST(ModelMeshModelsTest, ALoadCancelledByItsCallerIsUndone) {
  FakeCore core;
  ModelMeshModels models(core.Backend());
  absl::StatusOr<uint64_t> s = models.Load("c", "/f", [] { return true; });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(core.Serves("c"));
  EXPECT_TRUE(models.Loaded().empty());
}

// ModelMesh's sequence: the load's call is cancelled, unloadModel follows at
// once. The unload waits for the load and returns with nothing served.
TEST(ModelMeshModelsTest, AnUnloadDuringTheLoadWaitsAndUndoesIt) {
  FakeCore core;
  ModelMeshModels models(core.Backend());
  core.HoldLoads();
  auto load = std::async(std::launch::async, [&] { return models.Load("m", "/f", kNotCancelled); });
  core.WaitForLoads(1);
  auto unload = std::async(std::launch::async, [&] { models.Unload("m"); });
  EXPECT_EQ(unload.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  // A second load of the same id meanwhile is refused, trying nothing.
  EXPECT_EQ(models.Load("m", "/f", kNotCancelled).status().code(), absl::StatusCode::kFailedPrecondition);
  core.ReleaseLoads();
  unload.get();
  EXPECT_FALSE(core.Serves("m"));
  EXPECT_EQ(load.get().status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(models.Loaded().empty());
  // The id loads again afterwards.
  EXPECT_TRUE(models.Load("m", "/f", kNotCancelled).ok());
}

TEST(ModelMeshModelsTest, UnloadAllTakesEveryPlacedModel) {
  FakeCore core;
  ModelMeshModels models(core.Backend());
  ASSERT_TRUE(models.Load("a", "/f", kNotCancelled).ok());
  ASSERT_TRUE(models.Load("b", "/f", kNotCancelled).ok());
  EXPECT_EQ(models.UnloadAll(), 2u);
  EXPECT_FALSE(core.Serves("a"));
  EXPECT_FALSE(core.Serves("b"));
  EXPECT_EQ(models.UnloadAll(), 0u);
}

// Many loads and unloads of a few ids at once: whatever the interleaving,
// what is served at the end is exactly what the registry calls loaded.
TEST(ModelMeshModelsTest, ConcurrentLoadsAndUnloadsStayConsistent) {
  FakeCore core;
  ModelMeshModels models(core.Backend());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string id = "m" + std::to_string((t + i) % 3);
        if ((i + t) % 2 == 0) {
          (void)models.Load(id, "/f", [&] { return i % 7 == 0; });
        } else {
          models.Unload(id);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<std::string> loaded = models.Loaded();
  for (const std::string id : {"m0", "m1", "m2"}) {
    const bool listed = std::find(loaded.begin(), loaded.end(), id) != loaded.end();
    EXPECT_EQ(core.Serves(id), listed) << id;
  }
}

}  // namespace
}  // namespace infergate
