#include "scheduler/repository/torchserve/torchserve_store.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/folder_entries.h"
#include "common/logging.h"
#include "common/owned_temp_folder.h"
#include "common/status_macros.h"
#include "common/zip_extract.h"
#include "google/protobuf/text_format.h"
#include "infergate/v1/model_config.pb.h"
#include "nlohmann/json.hpp"
#include "scheduler/repository/model_name.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;

constexpr char kConfigFile[] = "config/config.properties";
constexpr char kStoreFolder[] = "model-store";
// TorchServe's name for a version an archive does not state.
constexpr char kUnstatedVersion[] = "1.0";
constexpr uint64_t kMaxLabelsFileBytes = 16 << 20;

// One archive to serve, before it is grouped with its model's others.
struct Wanted {
  std::string mar_name;  // file name in the store
  std::string model;     // from the snapshot or load_models; "" takes the manifest's
  std::string version;   // from the snapshot; "" takes the manifest's
  TorchServeVersionSettings settings;
};

struct Extracted {
  Wanted wanted;
  std::string folder;
  MarManifest manifest;
};

bool IsDir(const fs::path& p) {
  std::error_code e;
  return fs::is_directory(p, e);
}

std::vector<std::string> MarFiles(const std::string& store) {
  std::vector<std::string> out;
  std::error_code e;
  for (const auto& entry : FolderEntries(store, &e)) {
    if (entry.path().extension() == ".mar" && entry.is_regular_file(e)) out.push_back(entry.path().filename());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The archives config.properties asks for: model_snapshot (or models)
// wins, as in TorchServe; else load_models; a store without a config
// serves every archive.
absl::StatusOr<std::vector<Wanted>> ArchivesToServe(const TorchServeConfig& config, bool has_config,
                                                    const std::string& store) {
  std::vector<Wanted> out;
  if (!config.snapshot.empty()) {
    for (const auto& [model, versions] : config.snapshot) {
      for (const auto& [version, settings] : versions) out.push_back({settings.mar_name, model, version, settings});
    }
    return out;
  }
  const std::string load = absl::AsciiStrToLower(config.load_models);
  if (!has_config || load == "all") {
    for (const std::string& mar : MarFiles(store)) out.push_back({mar, "", "", {}});
    return out;
  }
  for (absl::string_view item : absl::StrSplit(config.load_models, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    Wanted w;
    if (size_t eq = item.find('='); eq != absl::string_view::npos) {
      w.model = std::string(item.substr(0, eq));
      item = item.substr(eq + 1);
    }
    if (absl::StartsWith(item, "http://") || absl::StartsWith(item, "https://") || absl::StartsWith(item, "s3://")) {
      return absl::InvalidArgumentError(
          absl::StrCat("config.properties: load_models: '", item.substr(0, 128),
                       "' is a URL; infergate serves archives from the model store only"));
    }
    w.mar_name = std::string(item);
    if (!absl::EndsWith(w.mar_name, ".mar")) absl::StrAppend(&w.mar_name, ".mar");
    out.push_back(std::move(w));
  }
  return out;
}

// index_to_name.json ({"0": "tench"} or {"0": ["n01440764", "tench"]}, or
// {"object_type_names": [...]}) as labels.txt lines, line N naming class N.
absl::StatusOr<std::string> LabelsFromIndexToName(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, "index_to_name.json"));
  if (text.size() > kMaxLabelsFileBytes) return absl::InvalidArgumentError("index_to_name.json: larger than 16 MiB");
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    return absl::InvalidArgumentError("index_to_name.json: not a JSON object");
  std::map<uint64_t, std::string> labels;
  if (auto names = doc.find("object_type_names"); names != doc.end() && names->is_array()) {
    for (size_t i = 0; i < names->size(); ++i)
      labels[i] = (*names)[i].is_string() ? (*names)[i].get<std::string>() : "";
  } else {
    for (const auto& [key, value] : doc.items()) {
      uint64_t index = 0;
      if (!absl::SimpleAtoi(key, &index) || index > 1000000) {
        return absl::InvalidArgumentError(
            absl::StrCat("index_to_name.json: key '", key.substr(0, 32), "' is not a class index"));
      }
      const nlohmann::json& label = value.is_array() && !value.empty() ? value.back() : value;
      if (!label.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat("index_to_name.json: class ", key, " has no name"));
      }
      labels[index] = label.get<std::string>();
    }
  }
  std::string out;
  const uint64_t count = labels.empty() ? 0 : labels.rbegin()->first + 1;
  for (uint64_t i = 0; i < count; ++i) {
    auto it = labels.find(i);
    std::string line = it == labels.end() ? absl::StrCat(i) : it->second;
    absl::StrReplaceAll({{"\n", " "}, {"\r", " "}}, &line);
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

// config.pbtxt for a model served from archives: every version, the
// default version's batching, timeout and queue size.
std::string ModelConfigText(const std::string& name, const TorchServeModel& model, const TorchServeConfig& config) {
  v1::ModelConfig c;
  c.set_name(name);
  const TorchServeVersionSettings& s = model.settings;
  c.set_max_batch_size(s.batch_size);
  if (s.batch_size > 1) c.mutable_dynamic_batching()->set_max_queue_delay_us(s.max_batch_delay_ms * 1000);
  c.mutable_version_policy()->mutable_all();
  const uint64_t timeout_s = s.response_timeout_s.value_or(config.default_response_timeout_s);
  c.mutable_default_queue_policy()->set_default_timeout_microseconds(timeout_s * 1000000);
  c.mutable_default_queue_policy()->set_max_queue_size(config.job_queue_size);
  std::vector<std::string> versions;
  for (const auto& [version, number] : model.versions) versions.push_back(absl::StrCat(version, " as ", number));
  c.set_description(absl::StrCat("TorchServe archive(s), handler ", MarHandlerName(model.handler), "; versions ",
                                 absl::StrJoin(versions, ", "), "; default ", model.default_version));
  std::string text;
  google::protobuf::TextFormat::PrintToString(c, &text);
  return text;
}

}  // namespace

bool IsTorchServeStore(const std::string& root) {
  std::error_code e;
  if (fs::exists(fs::path(root) / kConfigFile, e) || IsDir(fs::path(root) / kStoreFolder)) return true;
  bool archives = false;
  for (const auto& entry : FolderEntries(root, &e)) {
    if (entry.is_directory(e) && entry.path().filename().string()[0] != '.') return false;  // a model folder
    archives = archives || entry.path().extension() == ".mar";
  }
  return archives;
}

absl::StatusOr<std::string> TorchServeCatalog::RepositoryVersion(const std::string& model,
                                                                 const std::string& version) const {
  auto it = models.find(model);
  if (it == models.end()) {
    for (const auto& [mar, why] : refused) {
      if (absl::StartsWith(mar, model + ".") || absl::StrContains(why, absl::StrCat("'", model, "'"))) {
        return absl::FailedPreconditionError(absl::StrCat("model '", model, "' was not loaded: ", why));
      }
    }
    return absl::NotFoundError(absl::StrCat("Model not found: '", model.substr(0, 128), "'"));
  }
  const std::string& wanted = version.empty() ? it->second.default_version : version;
  auto v = it->second.versions.find(wanted);
  if (v == it->second.versions.end()) {
    return absl::NotFoundError(
        absl::StrCat("Model version '", wanted.substr(0, 64), "' of model '", model, "' not found"));
  }
  return absl::StrCat(v->second);
}

namespace {

// Where the archives are: model-store/ beside config/ (KServe's layout),
// else the model_store config.properties names (relative to the root),
// else the root.
absl::StatusOr<std::string> LocateArchives(const std::string& root, const TorchServeConfig& config) {
  if (IsDir(fs::path(root) / kStoreFolder)) return (fs::path(root) / kStoreFolder).string();
  if (config.model_store.empty()) return root;
  const fs::path named = fs::path(root) / config.model_store;
  if (!IsDir(named)) {
    return absl::NotFoundError(absl::StrCat("config.properties: model_store '", config.model_store,
                                            "' is not a folder, and ", root, " has no model-store/"));
  }
  return named.string();
}

// A folder of its own, owner-only, made without throwing.
absl::Status MakePrivateFolder(const fs::path& folder) {
  std::error_code e;
  fs::create_directories(folder, e);
  if (!e) fs::permissions(folder, fs::perms::owner_all, e);
  if (e) return absl::UnavailableError(absl::StrCat("cannot make ", folder.string(), ": ", e.message()));
  return absl::OkStatus();
}

void RemoveQuietly(const fs::path& path) {
  std::error_code ignored;
  fs::remove_all(path, ignored);
}

// Extracts archive `w` from `archives` into `folder` and reads its
// manifest, within what is left of `unpack_budget` (taken from it when the
// archive is kept). A refusal's status says why; nothing of it is kept.
absl::StatusOr<Extracted> ExtractArchive(Wanted w, const std::string& archives, const std::string& folder,
                                         uint64_t max_archive_bytes, uint64_t& unpack_budget) {
  if (w.mar_name.find('/') != std::string::npos || !IsSafeZipEntryName(w.mar_name)) {
    return absl::InvalidArgumentError("its name must be a file in the model store");
  }
  RETURN_IF_ERROR(MakePrivateFolder(folder));
  // One budget for the whole store: what every archive unpacks to.
  ZipExtractLimits limits;
  limits.max_total_bytes = unpack_budget;
  absl::StatusOr<uint64_t> bytes = ExtractZip(absl::StrCat(archives, "/", w.mar_name), folder, limits);
  if (!bytes.ok()) {
    RemoveQuietly(folder);
    if (bytes.status().code() != absl::StatusCode::kResourceExhausted) return bytes.status();
    return absl::ResourceExhaustedError(absl::StrCat("it extracts to more than is left of the limit of ",
                                                     max_archive_bytes, " bytes for all the store's archives (",
                                                     unpack_budget, " left; --mar-max-bytes)"));
  }
  absl::StatusOr<MarManifest> manifest = ReadMarManifest(folder, w.mar_name);
  if (!manifest.ok()) {
    RemoveQuietly(folder);
    return manifest.status();
  }
  if (w.model.empty()) w.model = manifest->model_name;
  if (w.version.empty()) w.version = manifest->model_version.empty() ? kUnstatedVersion : manifest->model_version;
  if (absl::Status s = ValidateModelName(w.model, "model name"); !s.ok()) {
    RemoveQuietly(folder);
    return s;
  }
  if (!manifest->config_file.empty()) {
    LOG_WARNING << "TorchServe archive " << w.mar_name << ": its configFile '" << manifest->config_file
                << "' is not read; batch size, delay and timeout come from config.properties' model_snapshot "
                << "(or TorchServe's defaults)";
  }
  LOG_INFO << "TorchServe archive " << w.mar_name << ": model '" << w.model << "' version " << w.version << ", handler "
           << MarHandlerName(manifest->handler) << ", " << *bytes << " bytes extracted";
  unpack_budget -= *bytes;  // what the archives kept take
  return Extracted{std::move(w), folder, *std::move(manifest)};
}

// Moves an extracted archive's folder to `version_dir`, its serialized file
// named as the repository serves it (model.pt or model.pt2).
absl::Status PlaceVersion(const Extracted& e, const fs::path& version_dir) {
  std::error_code moved;
  fs::rename(e.folder, version_dir, moved);
  if (moved) return absl::UnavailableError(absl::StrCat("cannot lay it out: ", moved.message()));
  const fs::path served = version_dir / (e.manifest.package ? "model.pt2" : "model.pt");
  std::error_code renamed;
  if (fs::path(version_dir / e.manifest.serialized_file) != served) {
    fs::rename(version_dir / e.manifest.serialized_file, served, renamed);
  }
  std::error_code e_exists;
  if (renamed || !fs::exists(served, e_exists)) {
    return absl::NotFoundError(
        absl::StrCat("serialized file '", e.manifest.serialized_file, "' is not in the archive"));
  }
  return absl::OkStatus();
}

// The one way an archive is refused: logged, and kept in the catalog with
// why (a client asking for its model is told).
void Refuse(TorchServeCatalog& catalog, const std::string& mar_name, absl::string_view why) {
  LOG_ERROR << "TorchServe archive " << mar_name << " is not served: " << why;
  catalog.refused[mar_name] = std::string(why);
}

// Class names for classification answers, from the default version's
// index_to_name.json, as the model's labels.txt.
void WriteLabels(const std::string& name, const fs::path& version_dir, const fs::path& model_dir) {
  const fs::path index_to_name = version_dir / "index_to_name.json";
  std::error_code e;
  if (!fs::exists(index_to_name, e)) return;
  absl::StatusOr<std::string> labels = LabelsFromIndexToName(index_to_name.string());
  if (!labels.ok()) {
    LOG_WARNING << "model '" << name << "': " << labels.status().message() << "; answers carry class indices";
    return;
  }
  if (absl::Status s = WriteFileAtomically((model_dir / "labels.txt").string(), *labels); !s.ok()) {
    LOG_WARNING << "model '" << name << "': labels not written: " << s.message();
  }
}

// Lays out one model's extracted versions under `repository`, numbered in
// TorchServe's order, with its config.pbtxt; records it (or each refused
// archive) in `catalog`.
void LayOutModel(const std::string& repository, const TorchServeConfig& config, TorchServeCatalog& catalog,
                 const std::string& name, std::vector<Extracted*> versions) {
  std::sort(versions.begin(), versions.end(), [](const Extracted* a, const Extracted* b) {
    return TorchServeVersionLess(a->wanted.version, b->wanted.version);
  });
  TorchServeModel model;
  model.name = name;
  model.handler = versions.back()->manifest.handler;
  const Extracted* chosen = versions.back();  // default: the newest, unless one is marked
  const fs::path model_dir = fs::path(repository) / name;
  if (absl::Status made = MakePrivateFolder(model_dir); !made.ok()) {
    for (const Extracted* e : versions) Refuse(catalog, e->wanted.mar_name, made.message());
    return;
  }
  int64_t number = 0;
  for (const Extracted* e : versions) {
    if (model.versions.count(e->wanted.version)) {
      Refuse(catalog, e->wanted.mar_name,
             absl::StrCat("version ", e->wanted.version, " of '", name, "' is given twice; the first archive serves"));
      continue;
    }
    if (e->manifest.handler != model.handler) {
      Refuse(catalog, e->wanted.mar_name,
             absl::StrCat("its handler ", MarHandlerName(e->manifest.handler), " differs from the other versions' (",
                          MarHandlerName(model.handler), ")"));
      continue;
    }
    const fs::path version_dir = model_dir / std::to_string(number + 1);
    if (absl::Status placed = PlaceVersion(*e, version_dir); !placed.ok()) {
      Refuse(catalog, e->wanted.mar_name, placed.message());
      RemoveQuietly(version_dir);
      continue;
    }
    ++number;
    model.versions[e->wanted.version] = number;
    model.archives[e->wanted.version] = e->wanted.mar_name;
    if (e->wanted.settings.default_version) chosen = e;
  }
  if (model.versions.empty()) return RemoveQuietly(model_dir);
  if (!model.versions.count(chosen->wanted.version)) chosen = nullptr;
  model.default_version = chosen ? chosen->wanted.version : model.versions.rbegin()->first;
  for (const Extracted* e : versions) {
    if (e->wanted.version == model.default_version) model.settings = e->wanted.settings;
  }
  WriteLabels(name, model_dir / std::to_string(model.versions[model.default_version]), model_dir);
  if (absl::Status s = WriteFileAtomically((model_dir / "config.pbtxt").string(), ModelConfigText(name, model, config));
      !s.ok()) {
    for (const auto& [version, mar] : model.archives) Refuse(catalog, mar, s.message());
    return RemoveQuietly(model_dir);
  }
  catalog.models[name] = std::move(model);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TorchServeStore>> TorchServeStore::Open(const std::string& root,
                                                                       const TorchServeStoreOptions& options) {
  std::unique_ptr<TorchServeStore> store(new TorchServeStore());
  const fs::path config_path = fs::path(root) / kConfigFile;
  std::error_code e;
  const bool has_config = fs::exists(config_path, e);
  if (has_config) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(config_path.string(), "config.properties"));
    ASSIGN_OR_RETURN(store->config_, ParseTorchServeConfig(text));
    for (const std::string& note : store->config_.notes) LOG_INFO << "TorchServe config.properties: " << note;
  }
  ASSIGN_OR_RETURN(const std::string archives, LocateArchives(root, store->config_));
  ASSIGN_OR_RETURN(std::vector<Wanted> wanted, ArchivesToServe(store->config_, has_config, archives));

  // The private work folder, named after this process, so that a later one
  // removes it should this one die without doing so.
  ASSIGN_OR_RETURN(store->work_, MakeOwnedTempFolder("infergate-torchserve-", options.work_parent));
  store->repository_ = store->work_ + "/repository";
  RETURN_IF_ERROR(MakePrivateFolder(store->repository_));

  // Extract and check each archive; a refused one is logged and skipped.
  uint64_t unpack_budget = options.max_archive_bytes;
  std::vector<Extracted> extracted;
  for (size_t i = 0; i < wanted.size(); ++i) {
    const std::string mar_name = wanted[i].mar_name;
    absl::StatusOr<Extracted> one =
        ExtractArchive(std::move(wanted[i]), archives, absl::StrCat(store->work_, "/archive-", i),
                       options.max_archive_bytes, unpack_budget);
    if (!one.ok()) {
      Refuse(store->catalog_, mar_name, one.status().message());
      continue;
    }
    extracted.push_back(*std::move(one));
  }

  // Group by model; number versions in TorchServe's order.
  std::map<std::string, std::vector<Extracted*>> by_model;
  for (Extracted& x : extracted) by_model[x.wanted.model].push_back(&x);
  for (auto& [name, versions] : by_model) {
    LayOutModel(store->repository_, store->config_, store->catalog_, name, std::move(versions));
  }
  LOG_INFO << "TorchServe model store " << archives << ": " << store->catalog_.models.size() << " model(s) served, "
           << store->catalog_.refused.size() << " archive(s) refused; laid out in " << store->repository_;
  return store;
}

TorchServeStore::~TorchServeStore() {
  if (work_.empty()) return;
  std::error_code ignored;
  fs::remove_all(work_, ignored);
}

}  // namespace infergate
