#include "absl/strings/string_view.h"
#include "scheduler/model_repository.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "scheduler/model_config.h"
#include "scheduler/model_name.h"

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


ModelRepository::ModelRepository(std::string root) : root_(std::move(root)) {}

absl::StatusOr<std::shared_ptr<const ModelEntry>> ModelRepository::ReadModel(const std::string& name) const {
  fs::path dir = fs::path(root_) / name;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("model: '", name, "' is not in the model repository"));
  }
  auto entry = std::make_shared<ModelEntry>();
  entry->name = name;
  entry->dir = dir.string();
  entry->config.set_name(name);
  fs::path config_path = dir / "config.pbtxt";
  if (fs::exists(config_path, ec)) {
    absl::StatusOr<std::string> text = ReadFile(config_path.string(), "config.pbtxt");
    absl::StatusOr<v1::ModelConfig> config = text.ok() ? ParseModelConfig(*text, name) : text.status();
    if (config.ok()) {
      entry->config = *std::move(config);
    } else {
      entry->problem = absl::FailedPreconditionError(
          absl::StrCat("model '", name, "' has a broken ", config.status().message()));
    }
  }
  entry->declared = DeclaredSignature(entry->config);
  for (const fs::directory_entry& sub : fs::directory_iterator(dir, ec)) {
    absl::StatusOr<int64_t> v = ParseVersion(sub.path().filename().string(), "version");
    if (!v.ok() || !sub.is_directory(ec)) continue;
    if (!fs::is_regular_file(sub.path() / "model.pt", ec)) continue;
    entry->versions.push_back(*v);
  }
  std::sort(entry->versions.begin(), entry->versions.end());
  if (entry->versions.empty() && entry->problem.ok()) {
    entry->problem = absl::FailedPreconditionError(
        absl::StrCat("model '", name, "' has no version folder holding a model.pt"));
  }
  return entry;
}

absl::Status ModelRepository::Scan() {
  std::error_code ec;
  fs::directory_iterator it(root_, ec);
  if (ec) {
    return absl::NotFoundError(absl::StrCat("model repository '", root_, "' cannot be read: ", ec.message()));
  }
  std::map<std::string, std::shared_ptr<const ModelEntry>, std::less<>> found;
  for (const fs::directory_entry& sub : it) {
    std::string name = sub.path().filename().string();
    if (!sub.is_directory(ec) || !ValidateModelName(name).ok()) continue;
    absl::StatusOr<std::shared_ptr<const ModelEntry>> entry = ReadModel(name);
    if (!entry.ok()) continue;
    if (!(*entry)->problem.ok()) LOG_WARNING << (*entry)->problem.message();
    found.emplace(name, *std::move(entry));
  }
  std::lock_guard<std::mutex> lock(mu_);
  models_ = std::move(found);
  return absl::OkStatus();
}

std::vector<ModelEntry> ModelRepository::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ModelEntry> out;
  out.reserve(models_.size());
  for (const auto& [name, entry] : models_) out.push_back(*entry);
  return out;
}

absl::StatusOr<std::shared_ptr<const ModelEntry>> ModelRepository::Find(absl::string_view name) {
  if (absl::Status s = ValidateModelName(name); !s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(name);
    if (it != models_.end()) {
      if (!it->second->problem.ok()) return it->second->problem;
      return it->second;
    }
  }
  // Not seen at the last scan: it may have been added since.
  absl::StatusOr<std::shared_ptr<const ModelEntry>> entry = ReadModel(std::string(name));
  if (!entry.ok()) return entry.status();
  std::lock_guard<std::mutex> lock(mu_);
  models_[(*entry)->name] = *entry;
  if (!(*entry)->problem.ok()) return (*entry)->problem;
  return entry;
}

absl::StatusOr<int64_t> ModelRepository::ResolveVersion(const ModelEntry& model, absl::string_view version,
                                                        absl::string_view field) {
  if (version.empty()) {
    if (model.versions.empty()) {
      return absl::NotFoundError(absl::StrCat("model '", model.name, "' has no versions"));
    }
    return model.versions.back();
  }
  absl::StatusOr<int64_t> v = ParseVersion(version, field);
  if (!v.ok()) return v.status();
  if (std::binary_search(model.versions.begin(), model.versions.end(), *v)) return *v;
  // A version may have been added since the model was read.
  absl::StatusOr<std::shared_ptr<const ModelEntry>> fresh = ReadModel(model.name);
  if (fresh.ok() && std::binary_search((*fresh)->versions.begin(), (*fresh)->versions.end(), *v)) {
    std::lock_guard<std::mutex> lock(mu_);
    models_[model.name] = *fresh;
    return *v;
  }
  return absl::NotFoundError(absl::StrCat(field, ": model '", model.name, "' has no version ", *v));
}

bool ModelRepository::Known(absl::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return models_.find(name) != models_.end();
}

std::string ModelRepository::ModelFile(const ModelEntry& model, int64_t version) const {
  return (fs::path(model.dir) / std::to_string(version) / "model.pt").string();
}

}  // namespace infergate
