#include "scheduler/repository/model_repository.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "scheduler/repository/aoti_package.h"
#include "scheduler/repository/aoti_signature.h"
#include "scheduler/repository/model_config.h"
#include "scheduler/repository/model_name.h"
#include "scheduler/repository/version_policy.h"

namespace infergate {

namespace fs = std::filesystem;

absl::StatusOr<int64_t> ParseVersion(absl::string_view text, absl::string_view field) {
  if (text.empty() || text.size() > 18 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", absl::CHexEscape(text.substr(0, 32)),
                                                   "' is not a model version (a non-negative integer)"));
  }
  int64_t v = 0;
  for (char c : text) v = v * 10 + (c - '0');
  return v;
}

absl::string_view VersionStateName(VersionState state) {
  switch (state) {
    case VersionState::kLoading: return "LOADING";
    case VersionState::kReady: return "READY";
    case VersionState::kUnavailable: return "UNAVAILABLE";
    case VersionState::kUnloading: return "UNLOADING";
  }
  return "UNAVAILABLE";
}

const VersionStatus* ModelEntry::Status(int64_t version) const {
  auto it = std::lower_bound(states.begin(), states.end(), version,
                             [](const VersionStatus& s, int64_t v) { return s.version < v; });
  return it != states.end() && it->version == version ? &*it : nullptr;
}

void ModelEntry::SetConfig(v1::ModelConfig new_config) {
  config = std::move(new_config);
  declared = DeclaredSignature(config);
  scheduling = SchedulingPolicyOf(config);
}

void RefreshServedVersions(ModelEntry& entry) {
  std::sort(entry.states.begin(), entry.states.end(),
            [](const VersionStatus& a, const VersionStatus& b) { return a.version < b.version; });
  entry.versions.clear();
  for (const VersionStatus& s : entry.states) {
    if (s.state == VersionState::kReady) entry.versions.push_back(s.version);
  }
}

absl::StatusOr<v1::ModelConfig> ReadModelConfig(const std::string& dir, const std::string& name, ConfigNaming naming) {
  fs::path path = fs::path(dir) / "config.pbtxt";
  std::error_code ec;
  absl::StatusOr<v1::ModelConfig> config;
  if (!fs::exists(path, ec)) {
    config.emplace().set_name(name);
  } else {
    ASSIGN_OR_RETURN(std::string text, ReadFile(path.string(), "config.pbtxt"));
    config = ParseModelConfig(text, name, naming);
    if (!config.ok()) return config;
  }
  // What the config leaves out of the signature, the newest package's own
  // metadata may give (aoti_signature.h). A package that cannot be read
  // here is refused when its version loads, with the reason.
  if (const std::string package = NewestPackageIn(dir); !package.empty()) {
    absl::StatusOr<std::vector<AotiVariant>> variants = ReadAotiVariants(package);
    if (variants.ok()) {
      absl::StatusOr<std::optional<v1::ModelConfig>> exported = PackageSignature(*variants, name);
      if (exported.ok() && *exported) return CompleteConfigFromPackage(*std::move(config), **exported);
    }
  }
  return config;
}

std::shared_ptr<const ClassLabels> ReadLabelsOrWarn(const ModelEntry& entry) {
  absl::StatusOr<std::shared_ptr<const ClassLabels>> labels = ReadClassLabels(entry.dir, entry.config);
  if (labels.ok()) return *std::move(labels);
  LOG_WARNING << "model '" << entry.name << "': " << labels.status().message()
              << "; classification answers carry no labels";
  return nullptr;
}

std::shared_ptr<ModelEntry> NewModelEntry(const std::string& root, const std::string& name) {
  auto entry = std::make_shared<ModelEntry>();
  entry->name = name;
  entry->dir = (fs::path(root) / name).string();
  entry->config.set_name(name);
  return entry;
}

absl::Status BrokenConfigProblem(absl::string_view model, const absl::Status& parse_error) {
  return absl::FailedPreconditionError(absl::StrCat("model '", model, "' has a broken ", parse_error.message()));
}

absl::Status NoVersionProblem(absl::string_view model) {
  return absl::FailedPreconditionError(
      absl::StrCat("model '", model, "' has no version folder holding a model.pt or model.pt2"));
}

std::string OutOfPolicyReason(const v1::VersionPolicy& policy) {
  return absl::StrCat("not served: version_policy serves ", DescribePolicy(policy));
}

std::shared_ptr<ModelEntry> ReadModelEntry(ModelRepository& repository, const DiskModel& disk) {
  std::shared_ptr<ModelEntry> entry = NewModelEntry(repository.root(), disk.name);
  entry->config_stamp = entry->config_tried = disk.config;
  absl::StatusOr<v1::ModelConfig> config = ReadModelConfig(entry->dir, disk.name);
  if (config.ok()) {
    if (absl::Status s = repository.CheckConfig(*config); !s.ok()) config = s;
  }
  if (config.ok()) {
    entry->SetConfig(*std::move(config));
  } else {
    entry->config_broken = true;
    entry->problem = BrokenConfigProblem(disk.name, config.status());
  }
  entry->labels = ReadLabelsOrWarn(*entry);
  std::vector<int64_t> on_disk;
  for (const auto& [v, stamp] : disk.versions) on_disk.push_back(v);
  std::vector<int64_t> served = SelectVersions(entry->config.version_policy(), on_disk);
  for (const auto& [v, stamp] : disk.versions) {
    VersionStatus s;
    s.version = v;
    s.stamp = s.tried = stamp;
    if (!entry->problem.ok()) {
      s.reason = kBrokenConfigReason;
    } else if (std::binary_search(served.begin(), served.end(), v)) {
      s.state = VersionState::kReady;
      s.generation = repository.NextGeneration();
    } else {
      s.state = VersionState::kUnavailable;
      s.out_of_policy = true;
      s.reason = OutOfPolicyReason(entry->config.version_policy());
    }
    entry->states.push_back(std::move(s));
  }
  RefreshServedVersions(*entry);
  if (entry->problem.ok() && disk.versions.empty()) {
    entry->problem = NoVersionProblem(disk.name);
  }
  return entry;
}

ModelRepository::ModelRepository(std::string root) : root_(std::move(root)) {}

absl::Status ModelRepository::Scan(DiskRepository* scanned) {
  absl::StatusOr<DiskRepository> disk = ScanRepository(root_);
  if (!disk.ok()) return disk.status();
  std::map<std::string, std::shared_ptr<const ModelEntry>, std::less<>> found;
  for (const auto& [name, model] : *disk) {
    std::shared_ptr<ModelEntry> entry = ReadModelEntry(*this, model);
    if (!entry->problem.ok()) LOG_WARNING << entry->problem.message();
    found.emplace(name, std::move(entry));
  }
  {
    MutexLock lock(mu_);
    models_ = std::move(found);
  }
  read_.store(true);
  if (scanned) *scanned = *std::move(disk);
  return absl::OkStatus();
}

std::vector<ModelEntry> ModelRepository::List() const {
  MutexLock lock(mu_);
  std::vector<ModelEntry> out;
  out.reserve(models_.size());
  for (const auto& [name, entry] : models_) out.push_back(*entry);
  return out;
}

std::shared_ptr<const ModelEntry> ModelRepository::Lookup(absl::string_view name) const {
  MutexLock lock(mu_);
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second;
}

absl::StatusOr<std::shared_ptr<const ModelEntry>> ModelRepository::Find(absl::string_view name) const {
  RETURN_IF_ERROR(ValidateModelName(name));
  std::shared_ptr<const ModelEntry> entry = Lookup(name);
  if (!entry) return read_.load() ? UnknownModelError(name) : RepositoryNotReadError(name);
  if (!entry->problem.ok()) return entry->problem;
  return entry;
}

absl::StatusOr<int64_t> ModelRepository::ResolveVersion(const ModelEntry& model, absl::string_view version,
                                                        absl::string_view field) const {
  if (model.unloaded) {
    return absl::UnavailableError(
        absl::StrCat("model '", model.name,
                     "' was unloaded by an explicit unload request; an explicit load (RepositoryModelLoad, "
                     "POST /v2/repository/models/",
                     model.name, "/load) serves it again"));
  }
  if (version.empty()) {
    if (!model.versions.empty()) return model.versions.back();
    std::string why = "none is on disk";
    for (const VersionStatus& s : model.states) {
      why = absl::StrCat("version ", s.version, " is ", VersionStateName(s.state),
                         s.reason.empty() ? "" : absl::StrCat(": ", s.reason));
    }
    return absl::UnavailableError(absl::StrCat("Request for unknown model: '", model.name,
                                               "' has no available versions; model '", model.name,
                                               "' has no version ready (", why, ")"));
  }
  ASSIGN_OR_RETURN(int64_t v, ParseVersion(version, field));
  if (std::binary_search(model.versions.begin(), model.versions.end(), v)) return v;
  const VersionStatus* s = model.Status(v);
  // Triton's words first (clients match on them), then which field and why.
  const std::string triton = absl::StrCat("Request for unknown model: '", model.name, "' version ", v);
  const std::string not_found = absl::StrCat(triton, " is not found; ");
  const std::string not_ready = absl::StrCat(triton, " is not at ready state; ");
  std::string head = absl::StrCat(field, ": model '", model.name, "' version ", v);
  if (!s) return absl::NotFoundError(absl::StrCat(not_found, field, ": model '", model.name, "' has no version ", v));
  switch (s->state) {
    case VersionState::kLoading:
      return absl::UnavailableError(absl::StrCat(not_ready, head, " is still loading; retry shortly"));
    case VersionState::kUnloading:
      return absl::NotFoundError(absl::StrCat(not_found, head, " is unloading: ", s->reason));
    case VersionState::kUnavailable:
      if (s->out_of_policy) return absl::NotFoundError(absl::StrCat(not_found, head, " is ", s->reason));
      return absl::FailedPreconditionError(absl::StrCat(not_ready, head, " is unavailable: ", s->reason));
    case VersionState::kReady: break;
  }
  return v;
}

void ModelRepository::Publish(std::shared_ptr<const ModelEntry> entry) {
  MutexLock lock(mu_);
  std::string name = entry->name;
  models_[name] = std::move(entry);
}

void ModelRepository::Erase(const std::string& name) {
  MutexLock lock(mu_);
  models_.erase(name);
}

bool ModelRepository::Known(absl::string_view name) const {
  MutexLock lock(mu_);
  return models_.find(name) != models_.end();
}

std::string ModelRepository::ModelFile(const ModelEntry& model, int64_t version) const {
  return VersionModelFile((fs::path(model.dir) / std::to_string(version)).string());
}

absl::Status UnknownModelError(absl::string_view name) {
  const absl::string_view shown = name.substr(0, 64);
  return absl::NotFoundError(absl::StrCat("Request for unknown model: '", shown, "' is not found; model: '", shown,
                                          "' is not in the model repository"));
}

absl::Status RepositoryNotReadError(absl::string_view name) {
  return absl::UnavailableError(absl::StrCat("Request for model '", name.substr(0, 64),
                                             "': the server is starting and has not read its model repository yet; "
                                             "retry once it reports ready"));
}

}  // namespace infergate
