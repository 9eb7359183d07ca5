#include "scheduler/core/model_lifecycle.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "scheduler/cache/model_manager.h"
#include "tests/scheduler/fake_servable.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;
using testing::FakeDevices;
using testing::FakeLoader;
using testing::FakeScript;

constexpr char kConfig[] = R"(inputs { name: "x" dtype: FLOAT32 dims: [2] })";

// Drives the lifecycle by hand (no poller thread): write files, scan, Apply.
// The fake loader reads the file, so a "broken" one fails like a corrupt
// TorchScript file, and it records what the view served while it loaded.
class ModelLifecycleTest : public ::testing::Test {
 protected:
  ModelLifecycleTest()
      : root_(fs::temp_directory_path() / ("ig_lifecycle_" + std::to_string(::getpid()) + "_" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name())),
        repository_((fs::remove_all(root_), fs::create_directories(root_), root_.string())),
        devices_(FakeDevices(/*cuda=*/false, /*mps=*/false)),
        models_(repository_,
                [this](const std::string& path, const v1::ModelConfig& config, const DeviceInfo& device, DType dtype,
                       const AdmitBytes& admit) -> absl::StatusOr<std::shared_ptr<Servable>> {
                  std::ifstream in(path);
                  std::stringstream text;
                  text << in.rdbuf();
                  loads_.push_back(path);
                  std::shared_ptr<const ModelEntry> served = repository_.Lookup(config.name());
                  served_while_loading_.push_back(served ? served->versions : std::vector<int64_t>{});
                  if (text.str().rfind("broken", 0) == 0) return absl::InvalidArgumentError("not a TorchScript file");
                  if (text.str().rfind("throws", 0) == 0) throw std::runtime_error("a loader's own bug");
                  return FakeLoader(script_)(path, config, device, dtype, admit);
                }),
        lifecycle_(repository_, models_, devices_) {}
  ~ModelLifecycleTest() override { fs::remove_all(root_); }

  void Write(const std::string& model, int64_t version, const std::string& content) {
    fs::create_directories(root_ / model / std::to_string(version));
    fs::path tmp = root_ / model / "tmp";
    std::ofstream(tmp) << content;
    fs::rename(tmp, root_ / model / std::to_string(version) / "model.pt");  // as a syncing sidecar does
  }
  void Config(const std::string& model, const std::string& text) {
    fs::create_directories(root_ / model);
    fs::path tmp = root_ / model / "tmp";
    std::ofstream(tmp) << text;
    fs::rename(tmp, root_ / model / "config.pbtxt");
  }
  void Start() { ASSERT_TRUE(repository_.Scan().ok()); }
  void Poll() {
    absl::StatusOr<DiskRepository> now = ScanRepository(root_.string());
    ASSERT_TRUE(now.ok());
    lifecycle_.Apply(*now, nullptr);
  }
  // "m" serving versions 1 and 2 (policy all), and "gone" serving version
  // 1: the removal tests delete m's version 1 and the whole of "gone".
  void StartWithAModelToRemove() {
    Config("m", std::string(kConfig) + " version_policy { all {} }");
    Write("m", 1, "one");
    Write("m", 2, "two");
    Config("gone", kConfig);
    Write("gone", 1, "one");
    Start();
  }
  // A request's load of `version` as the planner routes it.
  absl::Status Use(const std::string& model, int64_t version) {
    absl::StatusOr<Route> route = Plan(model, version);
    if (!route.ok()) return route.status();
    return models_.Acquire(*route).status();
  }
  absl::StatusOr<Route> Plan(const std::string& model, int64_t version) {
    absl::StatusOr<std::shared_ptr<const ModelEntry>> entry = repository_.Find(model);
    if (!entry.ok()) return entry.status();
    Route route;
    route.model = *entry;
    route.version = version;
    if (const VersionStatus* s = (*entry)->Status(version)) {
      route.generation = s->generation;
      route.stamp = s->stamp;
    }
    route.device = *devices_.Find(DeviceId{DeviceKind::kCpu, 0});
    return route;
  }
  std::vector<std::pair<int64_t, uint64_t>> Resident(const std::string& model) {
    std::vector<std::pair<int64_t, uint64_t>> out;
    for (const ResidentModel& r : models_.Resident()) {
      if (r.key.model == model) out.push_back({r.key.version, r.key.generation});
    }
    return out;
  }
  const VersionStatus& State(const std::string& model, int64_t version) {
    static VersionStatus missing;
    std::shared_ptr<const ModelEntry> entry = repository_.Lookup(model);
    const VersionStatus* s = entry ? entry->Status(version) : nullptr;
    return s ? *s : missing;
  }
  std::vector<int64_t> Served(const std::string& model) {
    std::shared_ptr<const ModelEntry> entry = repository_.Lookup(model);
    return entry ? entry->versions : std::vector<int64_t>{};
  }

  fs::path root_;
  ModelRepository repository_;
  DeviceRegistry devices_;
  std::shared_ptr<FakeScript> script_ = std::make_shared<FakeScript>();
  std::vector<std::string> loads_;
  std::vector<std::vector<int64_t>> served_while_loading_;
  ModelManager models_;
  ModelLifecycle lifecycle_;
};

TEST_F(ModelLifecycleTest, ANewVersionIsLoadedBeforeItAnswersAndTheOldOneGoesAfter) {
  Config("m", kConfig);
  Write("m", 1, "good one");
  Start();
  ASSERT_TRUE(Use("m", 1).ok());
  const uint64_t first = State("m", 1).generation;
  Write("m", 2, "good two");
  Poll();
  EXPECT_EQ(Served("m"), (std::vector<int64_t>{2}));
  ASSERT_EQ(loads_.size(), 2u);
  EXPECT_EQ(served_while_loading_[1], (std::vector<int64_t>{1})) << "version 2 answered before it was loaded";
  EXPECT_EQ(State("m", 1).state, VersionState::kUnavailable);
  EXPECT_NE(State("m", 1).reason.find("version_policy"), std::string::npos) << State("m", 1).reason;
  EXPECT_EQ(Resident("m"), (std::vector<std::pair<int64_t, uint64_t>>{{2, State("m", 2).generation}}));
  EXPECT_GT(State("m", 2).generation, first);
}

TEST_F(ModelLifecycleTest, ABrokenVersionIsNeverServedAndNotRetriedUntilItChanges) {
  Config("m", kConfig);
  Write("m", 1, "good one");
  Start();
  Write("m", 2, "broken!");
  Poll();
  EXPECT_EQ(Served("m"), (std::vector<int64_t>{1})) << "the last good version keeps answering";
  EXPECT_EQ(State("m", 2).state, VersionState::kUnavailable);
  EXPECT_NE(State("m", 2).reason.find("not a TorchScript file"), std::string::npos) << State("m", 2).reason;
  absl::StatusOr<std::shared_ptr<const ModelEntry>> entry = repository_.Find("m");
  ASSERT_TRUE(entry.ok());
  absl::Status asked = repository_.ResolveVersion(**entry, "2").status();
  EXPECT_EQ(asked.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(asked.message().find("not a TorchScript file"), absl::string_view::npos) << asked;
  // "latest 1" fell back to version 1, which loaded in the same pass.
  EXPECT_EQ(State("m", 1).state, VersionState::kReady);
  const size_t loads = loads_.size();
  Poll();
  EXPECT_EQ(loads_.size(), loads) << "a refused file is tried again only once it changes";
  Write("m", 2, "good two, fixed");
  Poll();
  EXPECT_EQ(Served("m"), (std::vector<int64_t>{2}));
}

// A loader that throws while a new version is checked (a programming error:
// the loaders catch LibTorch's own) refuses that version with what it
// threw; the process and the serving version carry on.
TEST_F(ModelLifecycleTest, ALoaderThatThrowsRefusesTheVersionAndTheServerCarriesOn) {
  Config("m", kConfig);
  Write("m", 1, "good one");
  Start();
  Write("m", 2, "throws");
  Poll();
  EXPECT_EQ(Served("m"), (std::vector<int64_t>{1}));
  EXPECT_EQ(State("m", 2).state, VersionState::kUnavailable);
  EXPECT_NE(State("m", 2).reason.find("threw: a loader's own bug"), std::string::npos) << State("m", 2).reason;
}

TEST_F(ModelLifecycleTest, AReplacedFileSwapsGenerationsAndABrokenReplacementIsRefused) {
  Config("m", kConfig);
  Write("m", 1, "good one");
  Start();
  ASSERT_TRUE(Use("m", 1).ok());
  const uint64_t before = State("m", 1).generation;
  Write("m", 1, "good one, retrained");
  Poll();
  const uint64_t after = State("m", 1).generation;
  EXPECT_GT(after, before);
  EXPECT_EQ(Resident("m"), (std::vector<std::pair<int64_t, uint64_t>>{{1, after}}));
  Write("m", 1, "broken");
  Poll();
  EXPECT_EQ(State("m", 1).state, VersionState::kReady);
  EXPECT_EQ(State("m", 1).generation, after) << "the good copy still answers";
  EXPECT_NE(State("m", 1).reason.find("update refused"), std::string::npos) << State("m", 1).reason;
  EXPECT_EQ(Resident("m"), (std::vector<std::pair<int64_t, uint64_t>>{{1, after}}));
}

TEST_F(ModelLifecycleTest, RemovedVersionsAndModelsUnloadThenDisappear) {
  StartWithAModelToRemove();
  ASSERT_TRUE(Use("m", 1).ok());
  ASSERT_TRUE(Use("gone", 1).ok());
  fs::remove_all(root_ / "m" / "1");
  fs::remove_all(root_ / "gone");
  Poll();
  EXPECT_EQ(Served("m"), (std::vector<int64_t>{2}));
  EXPECT_EQ(State("m", 1).state, VersionState::kUnloading);
  EXPECT_EQ(State("gone", 1).state, VersionState::kUnloading);
  EXPECT_EQ(repository_.Find("gone").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Resident("m").empty());
  EXPECT_TRUE(Resident("gone").empty());
  Poll();
  EXPECT_EQ(repository_.Lookup("m")->states.size(), 1u);
  EXPECT_EQ(repository_.Lookup("gone"), nullptr);
}

// A request planned before its model (or pinned version) was removed finds
// its copy unloaded and its file gone; it is told what the repository now
// says, as a request arriving after the removal would be.
TEST_F(ModelLifecycleTest, ARouteOvertakenByARemovalGetsTheRepositorysAnswer) {
  StartWithAModelToRemove();
  absl::StatusOr<Route> m1 = Plan("m", 1);
  absl::StatusOr<Route> gone = Plan("gone", 1);
  ASSERT_TRUE(m1.ok() && gone.ok());
  gone->latest = true;
  EXPECT_TRUE(models_.RepositoryAnswer(*m1, /*follow_latest=*/false).ok());
  EXPECT_TRUE(models_.RepositoryAnswer(*gone, /*follow_latest=*/true).ok());
  fs::remove_all(root_ / "m" / "1");
  fs::remove_all(root_ / "gone");
  Poll();
  // The load alone only knows the file is missing.
  EXPECT_EQ(models_.Acquire(*gone).status().code(), absl::StatusCode::kNotFound);
  absl::Status removed = models_.RepositoryAnswer(*gone, /*follow_latest=*/true);
  EXPECT_EQ(removed.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(removed.message().find("'gone' was removed from the model repository"), absl::string_view::npos) << removed;
  absl::Status unloading = models_.RepositoryAnswer(*m1, /*follow_latest=*/false);
  EXPECT_EQ(unloading.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unloading.message().find("version 1 is unloading"), absl::string_view::npos) << unloading;
  // A request for the latest version of "m" would be served version 2.
  m1->latest = true;
  EXPECT_TRUE(models_.RepositoryAnswer(*m1, /*follow_latest=*/true).ok());
}

TEST_F(ModelLifecycleTest, ABrokenConfigUpdateKeepsThePreviousConfig) {
  Config("m", "max_batch_size: 4 " + std::string(kConfig));
  Write("m", 1, "one");
  Start();
  Config("m", "max_batch_size: {");
  Poll();
  std::shared_ptr<const ModelEntry> entry = repository_.Lookup("m");
  ASSERT_TRUE(entry->problem.ok());
  EXPECT_EQ(entry->config.max_batch_size(), 4u);
  EXPECT_NE(entry->config_problem.find("config.pbtxt update refused"), std::string::npos) << entry->config_problem;
  EXPECT_EQ(Served("m"), (std::vector<int64_t>{1}));
  Config("m", "max_batch_size: 8 " + std::string(kConfig));
  Poll();
  EXPECT_EQ(repository_.Lookup("m")->config.max_batch_size(), 8u);
  EXPECT_TRUE(repository_.Lookup("m")->config_problem.empty());
}

TEST_F(ModelLifecycleTest, ANewModelFolderIsLoadedThenServed) {
  Start();
  Config("late", kConfig);
  Write("late", 3, "three");
  Poll();
  EXPECT_EQ(Served("late"), (std::vector<int64_t>{3}));
  EXPECT_EQ(served_while_loading_.back(), std::vector<int64_t>{});
  EXPECT_EQ(Resident("late").size(), 1u);
}

// A model with nothing to serve at start (no version yet, or a broken
// config) is served as soon as what it lacked arrives.
TEST_F(ModelLifecycleTest, AModelUnservableAtStartIsServedOnceFixed) {
  Config("empty", kConfig);
  Config("badcfg", "max_batch_size: {");
  Write("badcfg", 1, "one");
  Start();
  EXPECT_EQ(repository_.Find("empty").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(State("badcfg", 1).state, VersionState::kUnavailable);
  EXPECT_EQ(State("badcfg", 1).reason, "config.pbtxt is broken");
  Poll();
  EXPECT_TRUE(loads_.empty()) << "nothing changed, nothing is tried";
  Write("empty", 1, "one");
  Config("badcfg", kConfig);
  Poll();
  EXPECT_EQ(Served("empty"), (std::vector<int64_t>{1}));
  EXPECT_EQ(Served("badcfg"), (std::vector<int64_t>{1}));
  EXPECT_TRUE(repository_.Find("badcfg").ok());
}

// Explicit control (polling off): LoadModel's sync reads one folder.
TEST_F(ModelLifecycleTest, SyncModelReadsOneFolder) {
  Start();
  Config("late", kConfig);
  Write("late", 1, "one");
  EXPECT_EQ(repository_.Find("late").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(lifecycle_.SyncModel("late").ok());
  EXPECT_EQ(Served("late"), (std::vector<int64_t>{1}));
  EXPECT_EQ(lifecycle_.SyncModel("absent").code(), absl::StatusCode::kNotFound);
}

// ModelMesh's loads: a folder outside the repository, served in place under
// the load's name though its config names another model; the poll leaves
// it alone; Forget takes it out altogether and leaves its folder as it was.
TEST_F(ModelLifecycleTest, AnOutsideFolderServesUnderTheLoadsNameUntilForgotten) {
  Start();
  const fs::path outside = root_.parent_path() / (root_.filename().string() + "_outside");
  fs::remove_all(outside);
  fs::create_directories(outside / "1");
  std::ofstream(outside / "config.pbtxt") << "name: \"saved_as\" " << kConfig;
  std::ofstream(outside / "1" / "model.pt") << "one";
  ModelLifecycle::Source source;
  source.folder = outside.string();
  ASSERT_TRUE(lifecycle_.SyncModel("placed__isvc-1", nullptr, source).ok());
  EXPECT_EQ(Served("placed__isvc-1"), (std::vector<int64_t>{1}));
  EXPECT_EQ(repository_.Lookup("placed__isvc-1")->dir, outside.string());
  EXPECT_EQ(Resident("placed__isvc-1").size(), 1u);
  EXPECT_EQ(loads_.back(), (outside / "1" / "model.pt").string());
  Poll();  // not in the repository's folder, yet not removed
  EXPECT_EQ(Served("placed__isvc-1"), (std::vector<int64_t>{1}));
  lifecycle_.Forget("placed__isvc-1");
  EXPECT_EQ(repository_.Lookup("placed__isvc-1"), nullptr);
  EXPECT_TRUE(Resident("placed__isvc-1").empty());
  EXPECT_TRUE(fs::exists(outside / "1" / "model.pt"));  // never the server's to remove
  lifecycle_.Forget("placed__isvc-1");                  // again: nothing to do
  // A folder that is not there changes nothing.
  source.folder = (outside / "missing").string();
  EXPECT_EQ(lifecycle_.SyncModel("other", nullptr, source).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(repository_.Lookup("other"), nullptr);
  fs::remove_all(outside);
}

// A broken config in an outside folder is the model's problem, as in the repository.
TEST_F(ModelLifecycleTest, AnOutsideFolderWithABrokenConfigIsNotServed) {
  Start();
  const fs::path outside = root_.parent_path() / (root_.filename().string() + "_outside");
  fs::remove_all(outside);
  fs::create_directories(outside / "1");
  std::ofstream(outside / "config.pbtxt") << "max_batch_size: nonsense";
  std::ofstream(outside / "1" / "model.pt") << "one";
  ModelLifecycle::Source source;
  source.folder = outside.string();
  ASSERT_TRUE(lifecycle_.SyncModel("placed", nullptr, source).ok());
  EXPECT_TRUE(Served("placed").empty());
  EXPECT_FALSE(repository_.Lookup("placed")->problem.ok());
  lifecycle_.Forget("placed");
  EXPECT_EQ(repository_.Lookup("placed"), nullptr);
  fs::remove_all(outside);
}

}  // namespace
}  // namespace infergate
