// The server follows its repository on disk while clients keep calling: a
// new version, a model.pt replaced in place, a broken version, a removed
// version and a new model folder, each served within two poll intervals
// plus its load time, with no failed request and every answer from a whole,
// good model.

#include <ATen/ops/full.h>
#include <torch/script.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>

#include "tests/common/scratch_dir.h"
#include "tests/integration/server_fixture.h"

namespace infergate::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr auto kPoll = std::chrono::milliseconds(200);
constexpr char kConfig[] =
    "max_batch_size: 8\ninputs { name: \"x\" dtype: FLOAT32 dims: [4] }\noutputs { name: \"y\" dtype: FLOAT32 dims: "
    "[4] "
    "}\n";

// A TorchScript model answering y = x * factor, with 8 MiB of padding so a
// load takes a moment and a copy is visibly not atomic.
// How long the server took to load `model`'s `version` the last time, as
// its log line says ("... served (generation G, loaded in N ms)"); zero
// when no such line is there yet.
std::chrono::milliseconds LoggedLoadTime(const std::string& log, const std::string& model, int version) {
  const std::string head = "model '" + model + "' version " + std::to_string(version) + ": ";
  std::chrono::milliseconds took{0};
  for (size_t at = log.find(head); at != std::string::npos; at = log.find(head, at + 1)) {
    const size_t end = log.find('\n', at);
    const std::string line = log.substr(at, end == std::string::npos ? std::string::npos : end - at);
    const size_t loaded = line.find("loaded in ");
    if (loaded != std::string::npos) took = std::chrono::milliseconds(std::atoll(line.c_str() + loaded + 10));
  }
  return took;
}

void WriteScaleModel(const fs::path& path, float factor) {
  torch::jit::Module m("Scale");
  m.register_parameter("w", at::full({4}, factor), false);
  m.register_parameter("pad", at::zeros({2 * 1024 * 1024}), false);
  m.define(R"(
def forward(self, x):
    return x * self.w + self.pad[0]
)");
  fs::create_directories(path.parent_path());
  m.save(path.string());
}

// Writes a version the way a syncing sidecar does: the file is made beside
// the repository and renamed into place, whole.
void PublishVersion(const fs::path& model_dir, int version, float factor) {
  fs::path staging = model_dir.parent_path().parent_path() / ("staging_" + std::to_string(version));
  WriteScaleModel(staging / "model.pt", factor);
  fs::create_directories(model_dir / std::to_string(version));
  fs::rename(staging / "model.pt", model_dir / std::to_string(version) / "model.pt");
  fs::remove_all(staging);
}

struct Seen {
  int64_t version = -1;
  float factor = 0;
  Clock::time_point at;
};

// Clients calling one model "latest" in a loop, checking every answer.
class Callers {
 public:
  Callers(const std::string& address, std::string model, std::map<float, int64_t> good)
      : model_(std::move(model)), good_(std::move(good)) {
    for (int i = 0; i < 3; ++i) {
      threads_.emplace_back([this, address] {
        auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
        const at::Tensor x = at::tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({1, 4});
        while (!stop_.load()) {
          v1::InferRequest req;
          req.set_model(model_);
          *req.add_inputs() = ToWire(x, "x");
          v1::InferResponse resp;
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
          grpc::Status s = stub->Infer(&ctx, req, &resp);
          std::lock_guard<std::mutex> lock(mu_);
          ++calls_;
          if (!s.ok()) {
            if (failures_.size() < 5) failures_.push_back(std::to_string(s.error_code()) + " " + s.error_message());
            ++failed_;
            continue;
          }
          at::Tensor y = FromWire(resp.outputs(0));
          const float factor = y[0][0].item<float>();
          // A whole model answers x * factor in every element, with a factor
          // one of the good files has, for the version that file was.
          bool whole = at::allclose(y, x * factor);
          auto it = good_.find(factor);
          if (!whole || it == good_.end() || it->second != resp.placement().model_version()) {
            ++wrong_;
            continue;
          }
          last_ = {resp.placement().model_version(), factor, Clock::now()};
          if (!first_seen_.count(factor)) first_seen_[factor] = Clock::now();
        }
      });
    }
  }
  ~Callers() { Stop(); }
  void Stop() {
    stop_.store(true);
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  // Waits (up to `limit`) for the first answer with `factor`; returns how
  // long after `since` it came, or nullopt.
  std::optional<std::chrono::milliseconds> AwaitFactor(float factor, Clock::time_point since,
                                                       std::chrono::seconds limit = std::chrono::seconds(20)) {
    for (auto end = Clock::now() + limit; Clock::now() < end;
         std::this_thread::sleep_for(std::chrono::milliseconds(5))) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = first_seen_.find(factor);
      if (it != first_seen_.end()) return std::chrono::duration_cast<std::chrono::milliseconds>(it->second - since);
    }
    return std::nullopt;
  }
  Seen last() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }
  uint64_t calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  void ExpectClean() {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(failed_, 0u) << "first failures: " << ::testing::PrintToString(failures_);
    EXPECT_EQ(wrong_, 0u) << "answers not from a whole, good model";
  }

 private:
  std::string model_;
  std::map<float, int64_t> good_;  // factor -> the version whose file has it
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  uint64_t calls_ = 0, failed_ = 0, wrong_ = 0;
  std::vector<std::string> failures_;
  std::map<float, Clock::time_point> first_seen_;
  Seen last_;
};

const v1::ModelInfo* FindModel(const v1::ListModelsResponse& models, const std::string& name) {
  for (const auto& m : models.models()) {
    if (m.name() == name) return &m;
  }
  return nullptr;
}

TEST(Repository, FollowsTheDiskWhileClientsCallWithoutAFailedRequest) {
  ScratchDir scratch("ig_repo_follow_");
  ASSERT_FALSE(scratch.path().empty());
  const fs::path repo = scratch.path();
  const fs::path models = repo / "models";
  const fs::path live = models / "live";
  fs::create_directories(live);
  std::ofstream(live / "config.pbtxt") << kConfig;
  PublishVersion(live, 1, 1.0f);

  auto server = ServerProcess::Start(
      {"--model-repository=" + models.string(), "--repository-poll-interval=200ms", "--devices=cpu"});
  ASSERT_NE(server, nullptr);
  auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  auto list = [&] {
    v1::ListModelsResponse out;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub->ListModels(&ctx, v1::ListModelsRequest(), &out).ok());
    return out;
  };
  // Factors each good file has, and its version: 1 -> v1, 2 -> v2, 3 -> v2
  // replaced in place, 5 -> v4 (v3 is broken and never answers).
  Callers callers(server->address(), "live", {{1.0f, 1}, {2.0f, 2}, {3.0f, 2}, {5.0f, 4}});
  ASSERT_TRUE(callers.AwaitFactor(1.0f, Clock::now()).has_value()) << server->Log();
  // Within two poll intervals plus the load, as the server's log line
  // measured it, plus 1 s for the callers to see it on a machine they keep
  // busy.
  auto within = [&](const std::string& model, int version) {
    return 2 * kPoll + LoggedLoadTime(server->Log(), model, version) + std::chrono::milliseconds(1000);
  };

  // 1. A new version.
  auto t = Clock::now();
  PublishVersion(live, 2, 2.0f);
  auto took = callers.AwaitFactor(2.0f, t);
  ASSERT_TRUE(took.has_value()) << "version 2 never answered\n" << server->Log();
  EXPECT_LE(*took, within("live", 2)) << "new version";
  std::cout << "new version served after " << took->count() << " ms\n";

  // 2. Version 2's model.pt replaced in place (an atomic rename over it).
  t = Clock::now();
  WriteScaleModel(repo / "replacement.pt", 3.0f);
  fs::rename(repo / "replacement.pt", live / "2" / "model.pt");
  took = callers.AwaitFactor(3.0f, t);
  ASSERT_TRUE(took.has_value()) << "the replaced file never answered\n" << server->Log();
  EXPECT_LE(*took, within("live", 2)) << "replaced model.pt";
  std::cout << "replaced file served after " << took->count() << " ms\n";

  // 3. A broken version 3, written slowly and not atomically: never served;
  // version 2 keeps answering, and version 3 says why.
  fs::create_directories(live / "3");
  {
    std::ofstream broken(live / "3" / "model.pt");
    broken << "PK\x03\x04 this is not a TorchScript archive";
    broken.flush();
    std::this_thread::sleep_for(kPoll);
    broken << std::string(4096, 'x');
  }
  const v1::ModelVersionStatus* v3 = nullptr;
  v1::ListModelsResponse listed;
  for (auto end = Clock::now() + std::chrono::seconds(20); Clock::now() < end && !v3;
       std::this_thread::sleep_for(kPoll)) {
    listed = list();
    const v1::ModelInfo* info = FindModel(listed, "live");
    for (const auto& v : info ? info->version_status() : decltype(info->version_status()){}) {
      if (v.version() == 3 && v.state() == v1::MODEL_VERSION_UNAVAILABLE) v3 = &v;
    }
  }
  ASSERT_NE(v3, nullptr) << "version 3 never showed as UNAVAILABLE\n" << server->Log();
  EXPECT_NE(v3->reason().find("load failed"), std::string::npos) << v3->reason();
  std::this_thread::sleep_for(2 * kPoll);
  EXPECT_EQ(callers.last().version, 2);
  EXPECT_EQ(callers.last().factor, 3.0f);
  EXPECT_NE(server->Log().find("model 'live' version 3: load failed"), std::string::npos);

  // 4. Version 4 answers; then it is removed, and version 2 (latest good)
  // answers again, loaded before version 4 goes.
  t = Clock::now();
  PublishVersion(live, 4, 5.0f);
  took = callers.AwaitFactor(5.0f, t);
  ASSERT_TRUE(took.has_value()) << "version 4 never answered\n" << server->Log();
  EXPECT_LE(*took, within("live", 4)) << "version 4";
  t = Clock::now();
  fs::remove_all(live / "4");
  bool back_to_2 = false;
  for (auto end = Clock::now() + std::chrono::seconds(20); Clock::now() < end && !back_to_2;
       std::this_thread::sleep_for(std::chrono::milliseconds(5))) {
    Seen last = callers.last();
    back_to_2 = last.version == 2 && last.at > t;
  }
  EXPECT_TRUE(back_to_2) << "removing version 4 did not bring version 2 back\n" << server->Log();
  std::cout << "after removing version 4, version 2 answered within "
            << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count() << " ms\n";

  // 5. A new model folder.
  t = Clock::now();
  fs::path staging = repo / "fresh";
  std::ofstream((fs::create_directories(staging), staging / "config.pbtxt")) << kConfig;
  WriteScaleModel(staging / "1" / "model.pt", 7.0f);
  fs::rename(staging, models / "fresh");
  Callers fresh(server->address(), "fresh", {{7.0f, 1}});
  took = fresh.AwaitFactor(7.0f, t);
  ASSERT_TRUE(took.has_value()) << "the new model never answered\n" << server->Log();
  EXPECT_LE(*took, within("fresh", 1)) << "new model folder";
  fresh.Stop();  // its first calls may predate the folder: NOT_FOUND is right for them

  callers.Stop();
  callers.ExpectClean();
  EXPECT_GT(callers.calls(), 100u);

  // The metrics count what happened.
  std::string scrape;
  ASSERT_EQ(RunCommand({"/usr/bin/curl", "-s", "http://" + server->metrics_address() + "/metrics"}, &scrape), 0);
  EXPECT_NE(scrape.find("infergate_model_updates_total{model=\"live\",result=\"failed\"} 1"), std::string::npos)
      << scrape.substr(0, 2000);
  EXPECT_NE(scrape.find("infergate_model_versions{model=\"live\",state=\"UNAVAILABLE\"}"), std::string::npos);
  // One log line per change, not one per poll: the broken file was tried once.
  const std::string log = server->Log();
  size_t refusals = 0;
  for (size_t at = log.find("version 3: load failed"); at != std::string::npos;
       at = log.find("version 3: load failed", at + 1)) {
    ++refusals;
  }
  EXPECT_EQ(refusals, 1u);
  stub.reset();
  EXPECT_EQ(server->Stop(), 0);
}

}  // namespace
}  // namespace infergate::testing
