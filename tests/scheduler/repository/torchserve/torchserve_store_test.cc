#include "scheduler/repository/torchserve/torchserve_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/file_util.h"
#include "common/owned_temp_folder.h"
#include "scheduler/repository/model_config.h"
#include "scheduler/repository/torchserve/java_properties.h"
#include "scheduler/repository/torchserve/torchserve_config.h"
#include "tests/common/zip_writer.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;
using testing::ZipOf;
using testing::ZipWriterEntry;

// KServe's sample config.properties for its TorchServe runtime.
constexpr char kKServeConfig[] = R"(inference_address=http://0.0.0.0:8085
management_address=http://0.0.0.0:8085
metrics_address=http://0.0.0.0:8082
grpc_inference_port=7070
grpc_management_port=7071
enable_envvars_config=true
install_py_dep_per_model=true
enable_metrics_api=true
metrics_mode=prometheus
NUM_WORKERS=1
number_of_netty_threads=4
job_queue_size=10
load_models=all
model_store=/mnt/models/model-store
model_snapshot={"name":"startup.cfg","modelCount":1,"models":{"mnist":{"1.0":{"defaultVersion":true,"marName":"mnist.mar","minWorkers":1,"maxWorkers":5,"batchSize":5,"maxBatchDelay":200,"responseTimeout":60}}}}
)";

TEST(JavaProperties, SeparatorsCommentsContinuationsAndEscapes) {
  absl::StatusOr<std::map<std::string, std::string>> p = ParseJavaProperties(
      "# comment\n! also\n  a=1\nb : two words\nc\tthree\nd=line \\\n    continued\ne=\\u0041\\tB\\\\\n"
      "models={\\\n  \"x\": 1\\\n}\r\nempty=\nf\n");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->at("a"), "1");
  EXPECT_EQ(p->at("b"), "two words");
  EXPECT_EQ(p->at("c"), "three");
  EXPECT_EQ(p->at("d"), "line continued");
  EXPECT_EQ(p->at("e"), "A\tB\\");
  EXPECT_EQ(p->at("models"), "{\"x\": 1}");
  EXPECT_EQ(p->at("empty"), "");
  EXPECT_EQ(p->at("f"), "");
  EXPECT_EQ(p->size(), 8u);
  EXPECT_EQ(ParseJavaProperties("k=\\u00").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TorchServeConfig, ReadsKServesSampleConfig) {
  absl::StatusOr<TorchServeConfig> c = ParseTorchServeConfig(kKServeConfig);
  ASSERT_TRUE(c.ok()) << c.status();
  const TorchServeVersionSettings& s = c->snapshot.at("mnist").at("1.0");
  EXPECT_EQ(s.mar_name, "mnist.mar");
  EXPECT_TRUE(s.default_version);
  EXPECT_EQ(s.batch_size, 5u);
  EXPECT_EQ(s.max_batch_delay_ms, 200u);
  EXPECT_EQ(s.response_timeout_s, 60u);
  EXPECT_EQ(s.max_workers, 5u);
  EXPECT_EQ(c->job_queue_size, 10u);
  EXPECT_EQ(c->load_models, "all");
  EXPECT_EQ(c->addresses.inference, "http://0.0.0.0:8085");
  EXPECT_EQ(c->addresses.grpc_inference_port, 7070);
  EXPECT_FALSE(c->notes.empty());  // the threads and Python keys, noted
}

TEST(TorchServeConfig, RefusesWhatWouldChangeBehaviourNamingIt) {
  struct Case {
    std::string text, needle;
  } cases[] = {
      {"certificate_file=/x.pem", "certificate_file: is not supported: set --tls-cert"},
      {"cors_allowed_origin=*", "cors_allowed_origin"},
      {"workflow_store=/w", "workflow_store"},
      {"made_up_key=1", "made_up_key: is not a TorchServe setting"},
      {"job_queue_size=many", "job_queue_size"},
      {"model_snapshot={\"models\":{\"m\":{\"1.0\":{\"marName\":\"m.mar\",\"batchSize\":0}}}}",
       "model_snapshot: m.1.0.batchSize: must be at least 1"},
      {"model_snapshot={\"models\":{\"m\":{\"1.0\":{\"marName\":\"m.mar\",\"batchSize\":\"x\"}}}}",
       "m.1.0.batchSize: must be a whole number"},
      {"model_snapshot={\"models\":{\"m\":{\"1.0\":{\"batchSize\":2}}}}", "m.1.0: has no marName"},
      {"model_snapshot={\"models\":{\"m\":{\"1.0\":{\"marName\":\"m.mar\",\"handler\":\"x\"}}}}",
       "m.1.0.handler: is not a TorchServe model setting"},
      {"model_snapshot={not json", "model_snapshot: is not a JSON object"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<TorchServeConfig> parsed = ParseTorchServeConfig(c.text);
    ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(parsed.status().message().find(c.needle), std::string::npos) << parsed.status();
  }
}

TEST(TorchServeConfig, EveryIgnoredOrRefusedKeySaysWhy) {
  for (absl::string_view key : {"NUM_WORKERS", "number_of_gpu", "install_py_dep_per_model", "service_envelope",
                                "keystore", "max_request_size", "default_service_handler", "ts_request_sequence_id"}) {
    const PropertyRow row = PropertyUseOf(key);
    EXPECT_TRUE(row.use == PropertyUse::kNoEffect || row.use == PropertyUse::kRefused) << key;
    EXPECT_FALSE(row.why.empty()) << key;
  }
  EXPECT_EQ(PropertyUseOf("model_snapshot").use, PropertyUse::kRead);
  EXPECT_EQ(PropertyUseOf("inference_address").use, PropertyUse::kAddress);
  EXPECT_EQ(PropertyUseOf("no_such_key").use, PropertyUse::kRefused);
  EXPECT_TRUE(PropertyUseOf("no_such_key").why.empty());
}

TEST(TorchServeConfig, VersionsOrderAsNumbers) {
  EXPECT_TRUE(TorchServeVersionLess("1.9", "1.10"));
  EXPECT_TRUE(TorchServeVersionLess("1.0", "2.0"));
  EXPECT_TRUE(TorchServeVersionLess("1", "1.0"));
  EXPECT_FALSE(TorchServeVersionLess("2.0", "1.10"));
  EXPECT_TRUE(TorchServeVersionLess("1.0a", "1.0b"));
}

std::string Manifest(const std::string& name, const std::string& version, const std::string& handler,
                     const std::string& serialized = "model.pt", const std::string& model_file = "") {
  std::string m = "{\"createdOn\": \"01/01/2026 00:00:00\", \"runtime\": \"python\", \"model\": {\"modelName\": \"" +
                  name + "\", \"serializedFile\": \"" + serialized + "\", \"handler\": \"" + handler + "\"";
  if (!version.empty()) m += ", \"modelVersion\": \"" + version + "\"";
  if (!model_file.empty()) m += ", \"modelFile\": \"" + model_file + "\"";
  return m + "}, \"archiverVersion\": \"0.12.0\"}";
}

class TorchServeStoreTest : public ::testing::Test {
 protected:
  TorchServeStoreTest() : root_(fs::temp_directory_path() / ("ig_ts_" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_ / "store" / "model-store");
    fs::create_directories(root_ / "work");
    options_.work_parent = (root_ / "work").string();
  }
  ~TorchServeStoreTest() override { fs::remove_all(root_); }

  void Mar(const std::string& file, std::vector<ZipWriterEntry> entries) {
    std::ofstream(root_ / "store" / "model-store" / file, std::ios::binary) << ZipOf(entries);
  }
  void Config(const std::string& text) {
    fs::create_directories(root_ / "store" / "config");
    std::ofstream(root_ / "store" / "config" / "config.properties") << text;
  }
  std::string store() const { return (root_ / "store").string(); }

  fs::path root_;
  TorchServeStoreOptions options_;
};

TEST_F(TorchServeStoreTest, LaysOutArchivesAsARepositoryAndMapsVersions) {
  Mar("clf.mar", {{"MAR-INF/MANIFEST.json", Manifest("clf", "1.0", "image_classifier", "resnet.pt"), true},
                  {"resnet.pt", "torchscript-v1", true},
                  {"index_to_name.json", R"({"0": ["n0", "tench"], "2": "goldfish"})"}});
  Mar("clf_v2.mar", {{"MAR-INF/MANIFEST.json", Manifest("clf", "2.0", "image_classifier", "resnet.pt")},
                     {"resnet.pt", "torchscript-v2"}});
  Config(R"(job_queue_size=7
model_snapshot={"name":"startup.cfg","modelCount":1,"models":{"clf":{"1.0":{"defaultVersion":true,"marName":"clf.mar","batchSize":4,"maxBatchDelay":50,"responseTimeout":30},"2.0":{"marName":"clf_v2.mar","batchSize":8}}}}
)");
  absl::StatusOr<std::unique_ptr<TorchServeStore>> opened = TorchServeStore::Open(store(), options_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const TorchServeStore& s = **opened;
  const fs::path model = fs::path(s.repository()) / "clf";
  EXPECT_EQ(*ReadFile((model / "1" / "model.pt").string()), "torchscript-v1");
  EXPECT_EQ(*ReadFile((model / "2" / "model.pt").string()), "torchscript-v2");
  EXPECT_EQ(*ReadFile((model / "labels.txt").string()), "tench\n1\ngoldfish\n");
  absl::StatusOr<v1::ModelConfig> config = ParseModelConfig(*ReadFile((model / "config.pbtxt").string()), "clf");
  ASSERT_TRUE(config.ok()) << config.status();
  // The default version's settings, as TorchServe would run it.
  EXPECT_EQ(config->max_batch_size(), 4u);
  EXPECT_EQ(config->dynamic_batching().max_queue_delay_us(), 50000u);
  EXPECT_EQ(config->default_queue_policy().default_timeout_microseconds(), 30000000u);
  EXPECT_EQ(config->default_queue_policy().max_queue_size(), 7u);
  EXPECT_TRUE(config->version_policy().has_all());
  const TorchServeCatalog& catalog = s.catalog();
  EXPECT_EQ(catalog.models.at("clf").handler, MarHandler::kImageClassifier);
  EXPECT_EQ(*catalog.RepositoryVersion("clf", ""), "1");
  EXPECT_EQ(*catalog.RepositoryVersion("clf", "2.0"), "2");
  EXPECT_EQ(catalog.RepositoryVersion("clf", "3.0").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(catalog.RepositoryVersion("other", "").status().code(), absl::StatusCode::kNotFound);
  // The work folder goes with the store.
  const std::string work = fs::path(s.repository()).parent_path().string();
  opened->reset();
  EXPECT_FALSE(fs::exists(work));
}

TEST_F(TorchServeStoreTest, AFolderOfArchivesServesEveryOne) {
  Mar("a.mar", {{"MAR-INF/MANIFEST.json", Manifest("a", "", "base_handler")}, {"model.pt", "a"}});
  Mar("b.mar",
      {{"MAR-INF/MANIFEST.json", Manifest("b", "3", "ts.torch_handler.base_handler", "b.pt2")}, {"b.pt2", "b"}});
  const std::string archives = (root_ / "store" / "model-store").string();
  EXPECT_TRUE(IsTorchServeStore(archives));
  EXPECT_TRUE(IsTorchServeStore(store()));
  absl::StatusOr<std::unique_ptr<TorchServeStore>> opened = TorchServeStore::Open(archives, options_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const TorchServeCatalog& catalog = (*opened)->catalog();
  ASSERT_EQ(catalog.models.size(), 2u);
  EXPECT_EQ(*catalog.RepositoryVersion("a", "1.0"), "1");  // an unstated version is TorchServe's 1.0
  EXPECT_EQ(*catalog.RepositoryVersion("b", "3"), "1");
  EXPECT_TRUE(fs::exists(fs::path((*opened)->repository()) / "b" / "1" / "model.pt2"));
  absl::StatusOr<v1::ModelConfig> config =
      ParseModelConfig(*ReadFile((*opened)->repository() + "/a/config.pbtxt"), "a");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_batch_size(), 1u);  // TorchServe's default batchSize
  EXPECT_EQ(config->default_queue_policy().default_timeout_microseconds(), 120000000u);
}

TEST_F(TorchServeStoreTest, RefusesWhatItCannotServeAndServesTheRest) {
  Mar("good.mar", {{"MAR-INF/MANIFEST.json", Manifest("good", "1.0", "base_handler")}, {"model.pt", "ok"}});
  Mar("custom.mar", {{"MAR-INF/MANIFEST.json", Manifest("custom", "1.0", "my_handler.py")}, {"model.pt", "x"}});
  Mar("eager.mar",
      {{"MAR-INF/MANIFEST.json", Manifest("eager", "1.0", "base_handler", "w.pth", "net.py")}, {"w.pth", "weights"}});
  Mar("segment.mar", {{"MAR-INF/MANIFEST.json", Manifest("segment", "1.0", "image_segmenter")}, {"model.pt", "x"}});
  Mar("slip.mar", {{"MAR-INF/MANIFEST.json", Manifest("slip", "1.0", "base_handler")}, {"../../escaped", "owned"}});
  Mar("bomb.mar", {{"MAR-INF/MANIFEST.json", Manifest("bomb", "1.0", "base_handler")},
                   {"model.pt", std::string(8 << 20, '\0'), true}});
  Mar("nomanifest.mar", {{"model.pt", "x"}});
  options_.max_archive_bytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<TorchServeStore>> opened = TorchServeStore::Open(store(), options_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const TorchServeCatalog& catalog = (*opened)->catalog();
  EXPECT_EQ(catalog.models.size(), 1u);
  EXPECT_TRUE(catalog.models.count("good"));
  auto refused = [&](const std::string& mar, const std::string& needle) {
    ASSERT_TRUE(catalog.refused.count(mar)) << mar;
    EXPECT_NE(catalog.refused.at(mar).find(needle), std::string::npos) << catalog.refused.at(mar);
  };
  refused("custom.mar", "handler 'my_handler.py' is a custom Python handler");
  refused("custom.mar", "torch.jit.script");
  refused("eager.mar", "model.modelFile 'net.py'");
  refused("segment.mar", "handler 'image_segmenter' is one of TorchServe's built-in handlers");
  refused("slip.mar", "outside the archive's folder");
  refused("bomb.mar", "limit of 1048576 bytes for all the store's archives");
  refused("nomanifest.mar", "MANIFEST.json: missing");
  // A request for a refused model says why.
  absl::StatusOr<std::string> custom = catalog.RepositoryVersion("custom", "");
  EXPECT_EQ(custom.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(custom.status().message().find("my_handler.py"), std::string::npos) << custom.status();
  // Nothing escaped its folder, and nothing of the refused archives stays.
  EXPECT_FALSE(fs::exists(root_ / "escaped"));
  EXPECT_FALSE(fs::exists(root_ / "work" / "escaped"));
  size_t folders = 0;
  for (const auto& e : fs::directory_iterator(fs::path((*opened)->repository()).parent_path())) {
    (void)e;
    ++folders;
  }
  EXPECT_EQ(folders, 1u);  // repository/ alone: every refused archive's folder was removed
}

// --mar-max-bytes bounds what the store's archives extract to together:
// many archives each under it cannot fill the disk between them.
TEST_F(TorchServeStoreTest, OneBudgetForEveryArchive) {
  const std::string weights(400 << 10, 'w');
  for (const char* name : {"a", "b", "c"}) {
    Mar(std::string(name) + ".mar",
        {{"MAR-INF/MANIFEST.json", Manifest(name, "1.0", "base_handler")}, {"model.pt", weights, true}});
  }
  options_.max_archive_bytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<TorchServeStore>> opened = TorchServeStore::Open(store(), options_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const TorchServeCatalog& catalog = (*opened)->catalog();
  EXPECT_EQ(catalog.models.size(), 2u);
  ASSERT_EQ(catalog.refused.size(), 1u);
  EXPECT_NE(catalog.refused.begin()->second.find("for all the store's archives"), std::string::npos)
      << catalog.refused.begin()->second;
}

// The work folder is named after this process, so that the next server
// removes what a crashed one left.
TEST_F(TorchServeStoreTest, TheWorkFolderNamesItsProcess) {
  Mar("a.mar", {{"MAR-INF/MANIFEST.json", Manifest("a", "1.0", "base_handler")}, {"model.pt", "a"}});
  absl::StatusOr<std::unique_ptr<TorchServeStore>> opened = TorchServeStore::Open(store(), options_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const std::string work = fs::path((*opened)->repository()).parent_path().filename().string();
  EXPECT_EQ(work.rfind("infergate-torchserve-" + ProcessOwnerMark() + "-", 0), 0u) << work;
  // A folder of a process that is gone (no pid is that high) goes
  // at the next sweep; this process's stays.
  fs::create_directories(root_ / "work" / "infergate-torchserve-4194999.1-abcdef" / "repository");
  EXPECT_EQ(RemoveFoldersOfGoneProcesses((root_ / "work").string(), "infergate-torchserve-").size(), 1u);
  EXPECT_TRUE(fs::exists((*opened)->repository()));
}

TEST_F(TorchServeStoreTest, ARefusedConfigStopsTheStore) {
  Config("keystore=/k.p12\n");
  absl::StatusOr<std::unique_ptr<TorchServeStore>> opened = TorchServeStore::Open(store(), options_);
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(opened.status().message().find("keystore"), std::string::npos) << opened.status();
  Config("load_models=good.mar,https://example.invalid/m.mar\n");
  opened = TorchServeStore::Open(store(), options_);
  EXPECT_NE(opened.status().message().find("is a URL"), std::string::npos) << opened.status();
}

}  // namespace
}  // namespace infergate
