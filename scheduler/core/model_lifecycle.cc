#include "scheduler/core/model_lifecycle.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "devices/device_failure.h"
#include "google/protobuf/util/message_differencer.h"
#include "scheduler/repository/config_override.h"
#include "scheduler/repository/model_config.h"
#include "scheduler/repository/model_name.h"
#include "scheduler/repository/triton/text_proto_json.h"
#include "scheduler/repository/triton/triton_config_rules.h"
#include "scheduler/repository/version_plan.h"
#include "scheduler/repository/version_policy.h"
#include "scheduler/routing/route_planner.h"

namespace infergate {
namespace fs = std::filesystem;

namespace {

// What a load answers once the model's entry is updated: a config that was
// refused (the previous one still serving) fails the load, as Triton's
// does; so does a version that failed to load (a warm-up sample refused, a
// broken file), whose previous copy, if any, still serves.
absl::Status LoadAnswer(const std::string& name, const ModelEntry& entry) {
  if (!entry.config_problem.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", name,
                     "': its config was refused, so nothing was loaded (the previous config still "
                     "serves): ",
                     entry.config_problem));
  }
  for (const VersionStatus& version : entry.states) {
    if (version.failed) {
      return absl::FailedPreconditionError(
          absl::StrCat("model '", name, "' version ", version.version, ": ", version.reason));
    }
  }
  return absl::OkStatus();
}

}  // namespace

ModelLifecycle::ModelLifecycle(ModelRepository& repository, ModelManager& models, const DeviceRegistry& devices)
    : repository_(repository), models_(models), devices_(devices) {}

void ModelLifecycle::Report(const std::string& model, ModelUpdateResult result) {
  if (observer_) observer_->OnModelUpdate(model, result);
}

DiskModel ModelLifecycle::Known(const ModelEntry& entry) {
  DiskModel model;
  model.name = entry.name;
  model.config = entry.config_tried;
  for (const VersionStatus& s : entry.states) {
    if (s.state != VersionState::kUnloading) model.versions[s.version] = s.tried;
  }
  return model;
}

DiskRepository ModelLifecycle::Known() const {
  DiskRepository known;
  for (const ModelEntry& entry : repository_.List()) {
    if (!entry.removed) known.emplace(entry.name, Known(entry));
  }
  return known;
}

void ModelLifecycle::FinishUnloading() {
  for (const ModelEntry& entry : repository_.List()) {
    if (entry.removed) {
      repository_.Erase(entry.name);
      continue;
    }
    auto unloading = [](const VersionStatus& s) { return s.state == VersionState::kUnloading; };
    if (std::none_of(entry.states.begin(), entry.states.end(), unloading)) continue;
    auto kept = std::make_shared<ModelEntry>(entry);
    kept->states.erase(std::remove_if(kept->states.begin(), kept->states.end(), unloading), kept->states.end());
    RefreshServedVersions(*kept);
    repository_.Publish(std::move(kept));
  }
  models_.DropUnserved();
}

void ModelLifecycle::Apply(const DiskRepository& now, const DiskRepository* previous) {
  MutexLock lock(mu_);
  FinishUnloading();
  // Models served from uploaded files are not the repository's to change;
  // the scan is copied only when there are some.
  DiskRepository known = Known();
  DiskRepository filtered;
  const DiskRepository* on_disk = &now;
  if (!sources_.empty()) {
    filtered = now;
    for (const auto& [name, dir] : sources_) {
      known.erase(name);
      filtered.erase(name);
    }
    on_disk = &filtered;
  }
  for (const ModelDiff& diff : DiffRepository(known, *on_disk, previous)) {
    LOG_INFO << "model repository: " << diff.ToString();
    auto disk = on_disk->find(diff.model);
    Update(diff, disk == on_disk->end() ? nullptr : &disk->second);
  }
}

absl::Status ModelLifecycle::SyncModel(const std::string& name, std::shared_ptr<const ConfigOverride> config_override,
                                       Source source) {
  RETURN_IF_ERROR(ValidateModelName(name));
  MutexLock lock(mu_);
  // Where the model's folder will be: files sent with the load, written to
  // a fresh private folder and checked before anything changes; a folder
  // named by the load; else the repository's folder.
  SourceFolder next;
  if (source.files) {
    ASSIGN_OR_RETURN(std::string dir, uploads_.Write(name, *source.files));
    if (absl::Status s = CheckUpload(name, dir, config_override.get()); !s.ok()) {
      uploads_.Remove(dir);
      return s;
    }
    next = {dir, /*owned=*/true, ConfigNaming::kMatchesFolder};
  } else if (!source.folder.empty()) {
    next = {source.folder, /*owned=*/false, ConfigNaming::kServedAs};
  }
  const std::string model_dir = next.dir.empty() ? (fs::path(repository_.root()) / name).string() : next.dir;
  absl::StatusOr<DiskModel> disk =
      next.dir.empty() ? ScanModel(repository_.root(), name) : ScanModelFolder(next.dir, name);
  // An override must make a valid config before it replaces the one in force.
  auto old_override = overrides_.find(name);
  const bool override_changed = old_override == overrides_.end()
                                    ? config_override != nullptr
                                    : (config_override == nullptr || !(*config_override == *old_override->second));
  if (config_override && !source.files) {
    if (!disk.ok()) return disk.status();
    absl::StatusOr<v1::ModelConfig> base = ReadModelConfig(model_dir, name, next.naming);
    if (!base.ok()) return absl::FailedPreconditionError(BrokenConfigProblem(name, base.status()).message());
    absl::StatusOr<v1::ModelConfig> merged =
        CheckModelConfig(ApplyConfigOverride(*base, *config_override), name, "parameters.config");
    if (!merged.ok()) return merged.status();
  }
  if (config_override) {
    overrides_[name] = config_override;
  } else {
    overrides_.erase(name);
  }
  // The folder changes: from (or to) another folder, or from one upload to
  // the next. An upload folder it leaves is removed once the new one serves.
  SourceFolder left_behind;
  if (auto it = sources_.find(name); it != sources_.end()) {
    left_behind = it->second;
    sources_.erase(it);
  }
  if (!next.dir.empty()) sources_[name] = next;
  const bool source_changed = left_behind.dir != next.dir;
  DiskRepository known_one;
  DiskRepository now_one;
  if (std::shared_ptr<const ModelEntry> entry = repository_.Lookup(name); entry && !entry->removed) {
    known_one.emplace(name, Known(*entry));
  }
  if (disk.ok()) {
    now_one.emplace(name, *disk);
  } else if (known_one.empty()) {
    sources_.erase(name);
    Release(next);
    Release(left_behind);
    return disk.status();
  }
  std::vector<ModelDiff> diffs = DiffRepository(known_one, now_one);
  if (diffs.empty() && disk.ok()) {
    // Nothing changed on disk, but a model an explicit unload took out of
    // service is brought back, and a new override is applied.
    std::shared_ptr<const ModelEntry> entry = repository_.Lookup(name);
    if ((entry && entry->unloaded) || override_changed || source_changed) {
      ModelDiff again;
      again.model = name;
      diffs.push_back(std::move(again));
    }
  }
  if (override_changed || source_changed) {
    // Re-read, with the override laid over it, and every version's file anew.
    for (ModelDiff& diff : diffs) diff.config_changed = true;
  }
  for (const ModelDiff& diff : diffs) {
    LOG_INFO << "model repository: "
             << (diff.empty() ? name + ": loaded again after an explicit unload" : diff.ToString())
             << (source.files ? " (from the files sent with the load)"
                              : (next.dir.empty() ? "" : " (from " + next.dir.substr(0, 256) + ")"));
    Update(diff, disk.ok() ? &*disk : nullptr);
  }
  if (source_changed) Release(left_behind);
  if (std::shared_ptr<const ModelEntry> entry = repository_.Lookup(name); entry && !entry->removed) {
    return LoadAnswer(name, *entry);
  }
  return absl::OkStatus();
}

ModelLifecycle::SourceFolder ModelLifecycle::FolderOf(const std::string& name) const {
  auto it = sources_.find(name);
  if (it != sources_.end()) return it->second;
  return {(fs::path(repository_.root()) / name).string(), /*owned=*/false, ConfigNaming::kMatchesFolder};
}

void ModelLifecycle::Release(const SourceFolder& folder) {
  if (folder.owned && !folder.dir.empty()) uploads_.Remove(folder.dir);
}

void ModelLifecycle::Forget(const std::string& name) {
  MutexLock lock(mu_);
  Remove(repository_.Lookup(name));
  repository_.Erase(name);
  overrides_.erase(name);
  if (auto it = sources_.find(name); it != sources_.end()) {
    Release(it->second);
    sources_.erase(it);
  }
}

absl::Status ModelLifecycle::CheckUpload(const std::string& name, const std::string& dir,
                                         const ConfigOverride* config_override) {
  absl::StatusOr<v1::ModelConfig> config = ReadModelConfig(dir, name);
  if (!config.ok()) return absl::InvalidArgumentError(absl::StrCat("file:", config.status().message()));
  if (config_override) {
    config = CheckModelConfig(ApplyConfigOverride(*config, *config_override), name, "parameters.config");
    if (!config.ok()) return config.status();
  }
  ASSIGN_OR_RETURN(DiskModel disk, ScanModel(fs::path(dir).parent_path().string(), name));
  std::optional<DeviceInfo> cpu = devices_.Find(kCpuDevice);
  if (!cpu) return absl::FailedPreconditionError("no cpu device to check the uploaded model on");
  for (const auto& [version, stamp] : disk.versions) {
    const std::string path = VersionModelFile((fs::path(dir) / std::to_string(version)).string());
    if (absl::Status s = models_.CheckLoads(path, *config, *cpu); !s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("file:", version, "/", fs::path(path).filename().string(),
                                                        " does not load (nothing was changed): ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> ModelLifecycle::Unload(const std::string& name) {
  MutexLock lock(mu_);
  std::shared_ptr<const ModelEntry> current = repository_.Lookup(name);
  if (!current || current->removed) {
    return UnknownModelError(name);
  }
  auto entry = std::make_shared<ModelEntry>(*current);
  entry->unloaded = true;
  for (VersionStatus& s : entry->states) {
    if (s.state != VersionState::kReady && s.state != VersionState::kLoading) continue;
    s.state = VersionState::kUnavailable;
    s.reason = "unloaded";
  }
  RefreshServedVersions(*entry);
  repository_.Publish(entry);
  size_t dropped = models_.DropModel(name);
  LOG_INFO << "model '" << name << "' unloaded by request; " << dropped << " resident cop"
           << (dropped == 1 ? "y" : "ies") << " dropped; it is unavailable until it is loaded again";
  Report(name, ModelUpdateResult::kUnloaded);
  return dropped;
}

absl::StatusOr<v1::ModelConfig> ModelLifecycle::ReadEffectiveConfig(const std::string& name) const {
  const SourceFolder folder = FolderOf(name);
  absl::StatusOr<v1::ModelConfig> config = ReadModelConfig(folder.dir, name, folder.naming);
  auto patch = overrides_.find(name);
  if (!config.ok() || patch == overrides_.end()) return config;
  return CheckModelConfig(ApplyConfigOverride(*config, *patch->second), name, "the load's parameters.config");
}

void ModelLifecycle::Remove(const std::shared_ptr<const ModelEntry>& current) {
  if (!current || current->removed) return;
  overrides_.erase(current->name);
  auto entry = std::make_shared<ModelEntry>(*current);
  entry->removed = true;
  entry->problem =
      absl::NotFoundError(absl::StrCat("model: '", entry->name, "' was removed from the model repository"));
  for (VersionStatus& s : entry->states) {
    s.state = VersionState::kUnloading;
    s.reason = "its model folder was removed";
  }
  RefreshServedVersions(*entry);
  repository_.Publish(entry);
  size_t dropped = models_.DropModel(entry->name);
  LOG_INFO << "model '" << entry->name << "' removed from the repository; " << dropped << " resident cop"
           << (dropped == 1 ? "y" : "ies") << " unloaded (requests in flight finish on them)";
  Report(entry->name, ModelUpdateResult::kRemoved);
}

void ModelLifecycle::FailVersion(const std::string& name, int64_t version, const absl::Status& why) {
  MutexLock lock(mu_);
  std::shared_ptr<const ModelEntry> current = repository_.Lookup(name);
  if (!current || current->removed) return;
  auto entry = std::make_shared<ModelEntry>(*current);
  for (VersionStatus& s : entry->states) {
    if (s.version != version) continue;
    s.state = VersionState::kUnavailable;
    s.reason = std::string(why.message());
  }
  RefreshServedVersions(*entry);
  repository_.Publish(entry);
  models_.DropVersions(name, {{version, 0, std::nullopt}});
  LOG_WARNING << "model '" << name << "' version " << version << " does not serve: " << why.message();
  Report(name, ModelUpdateResult::kFailed);
}

absl::Status TritonGpusPresent(const v1::ModelConfig& config, const DeviceRegistry& devices) {
  if (config.triton_config_text().empty()) return absl::OkStatus();
  absl::StatusOr<nlohmann::json> tree = TextProtoToJson(config.triton_config_text());
  if (!tree.ok()) return absl::OkStatus();  // read once already; not read here
  std::vector<int64_t> cuda;
  for (const DeviceInfo& d : devices.Snapshot()) {
    if (d.id.kind == DeviceKind::kCuda) cuda.push_back(d.id.index);
  }
  return CheckTritonGpuIds(*tree, config.name(), "config.pbtxt", cuda);
}

bool ModelLifecycle::UpdateConfig(ModelEntry& entry, const ModelEntry* current, const ModelDiff& diff,
                                  const DiskModel& disk) {
  const std::string& name = entry.name;
  // A version coming or going may change what a package completes the
  // config with (aoti_signature.h), so the config is read again; it counts
  // as changed only if it reads differently.
  const bool versions_moved =
      !diff.versions_added.empty() || !diff.versions_changed.empty() || !diff.versions_removed.empty();
  const bool read_again =
      !current || diff.config_changed || (versions_moved && !current->config_broken && current->config_problem.empty());
  if (!read_again) return false;
  entry.config_tried = disk.config;
  absl::StatusOr<v1::ModelConfig> config = ReadEffectiveConfig(name);
  if (config.ok()) {
    if (absl::Status s = repository_.CheckConfig(*config); !s.ok()) config = s;
  }
  if (config.ok()) {
    const bool changed = !current || !google::protobuf::util::MessageDifferencer::Equals(current->config, *config);
    entry.SetConfig(*std::move(config));
    entry.labels = ReadLabelsOrWarn(entry);
    entry.config_stamp = disk.config;
    entry.config_problem.clear();
    entry.config_broken = false;
    if (current && changed) LOG_INFO << "model '" << name << "': its config changed; reloading its versions";
    return changed;
  }
  if (current && !current->config_broken) {
    entry.config_problem = absl::StrCat("config.pbtxt update refused (", config.status().message(),
                                        "); the previous config still applies");
    LOG_WARNING << "model '" << name << "': " << entry.config_problem;
  } else {
    entry.config_broken = true;
    entry.problem = BrokenConfigProblem(name, config.status());
    LOG_WARNING << entry.problem.message();
  }
  Report(name, ModelUpdateResult::kFailed);
  return false;
}

void ModelLifecycle::Update(const ModelDiff& diff, const DiskModel* disk) {
  std::shared_ptr<const ModelEntry> current = repository_.Lookup(diff.model);
  if (current && current->removed) current = nullptr;
  if (diff.removed || !disk) return Remove(current);

  const std::string& name = diff.model;
  std::shared_ptr<ModelEntry> entry =
      current ? std::make_shared<ModelEntry>(*current) : NewModelEntry(repository_.root(), name);
  entry->dir = FolderOf(name).dir;  // the repository's, or another; a served model's folder may have moved
  entry->unloaded = false;          // an explicit load, or new files: back in service
  VersionPlanInput plan;
  plan.config_changed = UpdateConfig(*entry, current.get(), diff, *disk);
  if (!entry->config_broken) entry->problem = absl::OkStatus();  // recomputed below

  std::map<int64_t, VersionStatus> states;
  for (const VersionStatus& s : entry->states) states[s.version] = s;
  plan.states = &states;
  plan.on_disk = &disk->versions;
  plan.policy = entry->config.version_policy();
  plan.config_broken = entry->config_broken;
  plan.removed_from_disk = diff.versions_removed;
  UpdateStep step{entry, states, *disk, {}};
  // A load that fails is planned around: "latest N" may reach an older version.
  for (bool replan = true; replan;) {
    replan = false;
    for (const VersionStep& planned : PlanVersions(plan)) {
      if (!CarryOut(planned, step)) {
        plan.failed_now.insert(planned.version);
        replan = true;
        break;
      }
    }
  }

  entry->states.clear();
  for (auto& [v, s] : states) entry->states.push_back(std::move(s));
  RefreshServedVersions(*entry);
  if (entry->problem.ok() && disk->versions.empty()) {
    entry->problem = NoVersionProblem(name);
  }
  repository_.Publish(entry);
  // Old copies go only now that the new ones answer; a request holding one
  // finishes on it.
  models_.DropVersions(name, step.drop);
}

bool ModelLifecycle::CarryOut(const VersionStep& planned, UpdateStep& step) {
  const std::string& name = step.entry->name;
  const int64_t v = planned.version;
  VersionStatus& s = step.states[v];
  s.version = v;
  auto drop_every_copy = [&] { step.drop.push_back({v, 0, std::nullopt}); };
  switch (planned.action) {
    case VersionAction::kKeep: return true;
    case VersionAction::kLoad:
    case VersionAction::kReplace: return LoadStep(planned.action == VersionAction::kReplace, s, step);
    case VersionAction::kRefuse:
      // No usable config: nothing is served, but every file is recorded as seen.
      if (s.state == VersionState::kReady) drop_every_copy();
      s.state = VersionState::kUnavailable;
      s.tried = step.disk.versions.at(v);
      s.reason = kBrokenConfigReason;
      return true;
    case VersionAction::kRetire: {
      const std::string out_of_policy = OutOfPolicyReason(step.entry->config.version_policy());
      if (s.state == VersionState::kReady) {
        LOG_INFO << "model '" << name << "' version " << v << ": " << out_of_policy;
        drop_every_copy();
      }
      s.state = VersionState::kUnavailable;
      s.tried = step.disk.versions.at(v);
      s.stamp = {};
      s.failed = false;
      s.out_of_policy = true;
      s.reason = out_of_policy;
      return true;
    }
    case VersionAction::kUnload:
      // Removed versions answer until what replaces them is loaded: they
      // turn UNLOADING only in the entry published last.
      if (s.state == VersionState::kReady) {
        LOG_INFO << "model '" << name << "' version " << v << ": removed from disk; unloading";
        Report(name, ModelUpdateResult::kRemoved);
      }
      s.state = VersionState::kUnloading;
      s.reason = "removed from disk";
      drop_every_copy();
      return true;
  }
  return true;
}

bool ModelLifecycle::LoadStep(bool serving, VersionStatus& s, UpdateStep& step) {
  const std::string& name = step.entry->name;
  const int64_t v = s.version;
  const FileStamp& stamp = step.disk.versions.at(v);
  if (!serving) {
    // LOADING is published while the file loads; what else is served goes on.
    s.state = VersionState::kLoading;
    s.reason.clear();
    auto loading = std::make_shared<ModelEntry>(*step.entry);
    loading->states.clear();
    for (const auto& [ver, st] : step.states) loading->states.push_back(st);
    RefreshServedVersions(*loading);
    repository_.Publish(std::move(loading));
  }
  const uint64_t generation = repository_.NextGeneration();
  const Clock::time_point start = Clock::now();
  absl::Status loaded = LoadVersion(step.entry, v, generation, stamp);
  s.tried = stamp;
  if (loaded.ok()) {
    if (serving) step.drop.push_back({v, s.generation, std::nullopt});
    s.state = VersionState::kReady;
    s.generation = generation;
    s.stamp = stamp;
    s.failed = false;
    s.out_of_policy = false;
    s.reason.clear();
    LOG_INFO << "model '" << name << "' version " << v << ": " << (serving ? "new model file" : "now")
             << " served (generation " << generation << ", loaded in " << MicrosBetween(start, Clock::now()) / 1000
             << " ms)";
    Report(name, ModelUpdateResult::kLoaded);
    return true;
  }
  s.failed = true;
  if (serving) {
    s.reason = absl::StrCat("update refused (", loaded.message(), "); the previous model file still answers");
  } else {
    s.state = VersionState::kUnavailable;
    s.reason = absl::StrCat("load failed: ", loaded.message());
  }
  LOG_WARNING << "model '" << name << "' version " << v << ": " << s.reason;
  Report(name, ModelUpdateResult::kFailed);
  return serving;  // a version that was not served and failed changes the plan
}

absl::Status ModelLifecycle::LoadVersion(const std::shared_ptr<const ModelEntry>& model, int64_t version,
                                         uint64_t generation, const FileStamp& stamp) {
  const ModelEntry& entry = *model;
  std::vector<LoadTarget> targets = RoutePlanner::UpdateTargets(entry, stamp, models_.Resident(), devices_);
  if (targets.empty()) return absl::FailedPreconditionError("no available device is allowed for the model");
  const std::vector<ModelManager::VersionCopies> this_generation = {{version, generation, std::nullopt}};
  bool loaded_somewhere = false;
  for (size_t i = 0; i < targets.size(); ++i) {
    const LoadTarget target = targets[i];  // a copy: `targets` may grow
    Route route;
    route.model = model;
    route.version = version;
    route.generation = generation;
    route.stamp = stamp;
    route.requested.automatic = true;
    route.device = *devices_.Find(target.device);
    route.dtype = target.dtype;
    absl::Status s = entry.config.warmup() ? models_.WarmUp(route) : models_.Acquire(route).status();
    if (s.ok()) {
      loaded_somewhere = true;
      continue;
    }
    // What an accelerator cannot run is the device's limit, not a broken
    // file: requests fall back to the cpu as usual, so check it there.
    if (target.device.kind != DeviceKind::kCpu && DeviceFailureOf(s).has_value()) {
      models_.DropVersions(entry.name, {{version, generation, target.device}});
      if (std::optional<LoadTarget> cpu = RoutePlanner::CpuInstead(entry, stamp, targets, devices_)) {
        targets.push_back(*cpu);
      }
      continue;
    }
    models_.DropVersions(entry.name, this_generation);
    return s;
  }
  if (!loaded_somewhere) {
    models_.DropVersions(entry.name, this_generation);
    return absl::FailedPreconditionError("no device could load the model");
  }
  return absl::OkStatus();
}

}  // namespace infergate
