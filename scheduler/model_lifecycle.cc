#include "scheduler/model_lifecycle.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "devices/device_failure.h"
#include "google/protobuf/util/message_differencer.h"
#include "scheduler/model_config.h"
#include "scheduler/config_override.h"
#include "scheduler/model_name.h"
#include "scheduler/route_planner.h"
#include "scheduler/version_policy.h"

namespace infergate {
namespace fs = std::filesystem;
namespace {

bool SameGeneration(const ModelKey& key, const std::string& model, int64_t version, uint64_t generation) {
  return key.model == model && key.version == version && key.generation == generation;
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
  // Copies no served generation names: versions that left the policy, or
  // loaded again for a request planned just before they were swapped out.
  models_.cache().Unload([&](const ModelKey& key) {
    std::shared_ptr<const ModelEntry> entry = repository_.Lookup(key.model);
    const VersionStatus* s = entry ? entry->Status(key.version) : nullptr;
    return !s || s->state != VersionState::kReady || s->generation != key.generation;
  });
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
  if (absl::Status s = ValidateModelName(name); !s.ok()) return s;
  MutexLock lock(mu_);
  // Where the model's folder will be: files sent with the load, written to
  // a fresh private folder and checked before anything changes; a folder
  // named by the load; else the repository's folder.
  SourceFolder next;
  if (source.files) {
    absl::StatusOr<std::string> dir = uploads_.Write(name, *source.files);
    if (!dir.ok()) return dir.status();
    if (absl::Status s = CheckUpload(name, *dir, config_override.get()); !s.ok()) {
      uploads_.Remove(*dir);
      return s;
    }
    next = {*dir, /*owned=*/true, ConfigNaming::kMatchesFolder};
  } else if (!source.folder.empty()) {
    next = {source.folder, /*owned=*/false, ConfigNaming::kServedAs};
  }
  const std::string model_dir = next.dir.empty() ? (fs::path(repository_.root()) / name).string() : next.dir;
  absl::StatusOr<DiskModel> disk =
      next.dir.empty() ? ScanModel(repository_.root(), name) : ScanModelFolder(next.dir, name);
  // An override must make a valid config before it replaces the one in force.
  auto old_override = overrides_.find(name);
  const bool override_changed =
      old_override == overrides_.end()
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
  absl::StatusOr<DiskModel> disk = ScanModel(fs::path(dir).parent_path().string(), name);
  if (!disk.ok()) return disk.status();
  std::optional<DeviceInfo> cpu = devices_.Find(DeviceId{DeviceKind::kCpu, 0});
  if (!cpu) return absl::FailedPreconditionError("no cpu device to check the uploaded model on");
  for (const auto& [version, stamp] : disk->versions) {
    const std::string path = (fs::path(dir) / std::to_string(version) / "model.pt").string();
    if (absl::Status s = models_.CheckLoads(path, *config, *cpu); !s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("file:", version, "/model.pt does not load (nothing was changed): ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> ModelLifecycle::Unload(const std::string& name) {
  MutexLock lock(mu_);
  std::shared_ptr<const ModelEntry> current = repository_.Lookup(name);
  if (!current || current->removed) {
    return absl::NotFoundError(absl::StrCat("model: '", name.substr(0, 64), "' is not in the model repository"));
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
  size_t dropped = models_.cache().Unload([&](const ModelKey& key) { return key.model == name; });
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
  entry->problem = absl::NotFoundError(absl::StrCat("model: '", entry->name, "' was removed from the model repository"));
  for (VersionStatus& s : entry->states) {
    s.state = VersionState::kUnloading;
    s.reason = "its model folder was removed";
  }
  RefreshServedVersions(*entry);
  repository_.Publish(entry);
  size_t dropped = models_.cache().Unload([&](const ModelKey& key) { return key.model == entry->name; });
  LOG_INFO << "model '" << entry->name << "' removed from the repository; " << dropped
           << " resident cop" << (dropped == 1 ? "y" : "ies") << " unloaded (requests in flight finish on them)";
  Report(entry->name, ModelUpdateResult::kRemoved);
}

void ModelLifecycle::Update(const ModelDiff& diff, const DiskModel* disk) {
  std::shared_ptr<const ModelEntry> current = repository_.Lookup(diff.model);
  if (current && current->removed) current = nullptr;
  if (diff.removed || !disk) return Remove(current);

  const std::string& name = diff.model;
  std::shared_ptr<ModelEntry> entry =
      current ? std::make_shared<ModelEntry>(*current) : NewModelEntry(repository_.root(), name);
  entry->dir = FolderOf(name).dir;  // the repository's, or another; a served model's folder may have moved
  entry->unloaded = false;  // an explicit load, or new files: back in service
  bool config_changed = !current;
  // A version coming or going may change what a package completes the
  // config with (aoti_signature.h), so the config is read again; it counts
  // as changed only if it reads differently.
  const bool versions_moved =
      !diff.versions_added.empty() || !diff.versions_changed.empty() || !diff.versions_removed.empty();
  if (!current || diff.config_changed ||
      (versions_moved && !current->config_broken && current->config_problem.empty())) {
    entry->config_tried = disk->config;
    absl::StatusOr<v1::ModelConfig> config = ReadEffectiveConfig(name);
    if (config.ok()) {
      config_changed = !current || !google::protobuf::util::MessageDifferencer::Equals(current->config, *config);
      entry->config = *std::move(config);
      entry->declared = DeclaredSignature(entry->config);
      entry->labels = ReadLabelsOrWarn(*entry);
      entry->config_stamp = disk->config;
      entry->config_problem.clear();
      entry->config_broken = false;
      if (current && config_changed) LOG_INFO << "model '" << name << "': its config changed; reloading its versions";
    } else if (current && !current->config_broken) {
      entry->config_problem = absl::StrCat("config.pbtxt update refused (", config.status().message(),
                                           "); the previous config still applies");
      LOG_WARNING << "model '" << name << "': " << entry->config_problem;
      Report(name, ModelUpdateResult::kFailed);
    } else {
      entry->config_broken = true;
      entry->problem = BrokenConfigProblem(name, config.status());
      LOG_WARNING << entry->problem.message();
      Report(name, ModelUpdateResult::kFailed);
    }
  }
  if (!entry->config_broken) entry->problem = absl::OkStatus();  // recomputed below

  std::map<int64_t, VersionStatus> states;
  for (const VersionStatus& s : entry->states) states[s.version] = s;
  std::vector<std::pair<int64_t, uint64_t>> drop;  // (version, generation) copies to unload; 0: every generation
  if (entry->config_broken) {
    // No usable config: nothing is served, but every file is recorded as seen.
    for (const auto& [v, stamp] : disk->versions) {
      VersionStatus& s = states[v];
      if (s.state == VersionState::kReady) drop.push_back({v, 0});
      s.version = v;
      s.state = VersionState::kUnavailable;
      s.tried = stamp;
      s.reason = kBrokenConfigReason;
    }
  } else {
    auto refused = [&](const VersionStatus& s, const FileStamp& stamp) {
      return s.failed && s.tried == stamp && !config_changed;
    };
    std::set<int64_t> failed_now;
    std::vector<int64_t> wanted;
    for (bool again = true; again;) {
      again = false;
      std::vector<int64_t> loadable;
      for (const auto& [v, stamp] : disk->versions) {
        auto it = states.find(v);
        bool broken = it != states.end() && it->second.state != VersionState::kReady && refused(it->second, stamp);
        if (!broken && !failed_now.count(v)) loadable.push_back(v);
      }
      wanted = SelectVersions(entry->config.version_policy(), loadable);
      for (auto v_it = wanted.rbegin(); v_it != wanted.rend(); ++v_it) {
        const int64_t v = *v_it;
        const FileStamp& stamp = disk->versions.at(v);
        VersionStatus& s = states[v];
        s.version = v;
        const bool serving = s.state == VersionState::kReady;
        if (refused(s, stamp) || (serving && s.stamp == stamp && !config_changed)) continue;
        if (!serving) {
          s.state = VersionState::kLoading;
          s.reason.clear();
          auto loading = std::make_shared<ModelEntry>(*entry);
          loading->states.clear();
          for (const auto& [ver, st] : states) loading->states.push_back(st);
          RefreshServedVersions(*loading);
          repository_.Publish(std::move(loading));
        }
        const uint64_t generation = repository_.NextGeneration();
        Clock::time_point start = Clock::now();
        absl::Status loaded = LoadVersion(entry, v, generation, stamp);
        s.tried = stamp;
        if (loaded.ok()) {
          if (serving) drop.push_back({v, s.generation});
          s.state = VersionState::kReady;
          s.generation = generation;
          s.stamp = stamp;
          s.failed = false;
          s.out_of_policy = false;
          s.reason.clear();
          LOG_INFO << "model '" << name << "' version " << v << ": " << (serving ? "new model.pt" : "now")
                   << " served (generation " << generation << ", loaded in "
                   << MicrosBetween(start, Clock::now()) / 1000 << " ms)";
          Report(name, ModelUpdateResult::kLoaded);
        } else {
          s.failed = true;
          if (serving) {
            s.reason = absl::StrCat("update refused (", loaded.message(), "); the previous model.pt still answers");
          } else {
            s.state = VersionState::kUnavailable;
            s.reason = absl::StrCat("load failed: ", loaded.message());
            failed_now.insert(v);
            again = true;  // "latest N" may now reach an older version
          }
          LOG_WARNING << "model '" << name << "' version " << v << ": " << s.reason;
          Report(name, ModelUpdateResult::kFailed);
        }
        if (again) break;
      }
    }
    const std::string out_of_policy = OutOfPolicyReason(entry->config.version_policy());
    for (const auto& [v, stamp] : disk->versions) {
      if (std::binary_search(wanted.begin(), wanted.end(), v)) continue;
      VersionStatus& s = states[v];
      s.version = v;
      if (s.state == VersionState::kUnavailable && s.failed && s.tried == stamp) continue;  // keeps its failure
      if (s.state == VersionState::kReady) {
        LOG_INFO << "model '" << name << "' version " << v << ": " << out_of_policy;
        drop.push_back({v, 0});
      }
      s.state = VersionState::kUnavailable;
      s.tried = stamp;
      s.stamp = {};
      s.failed = false;
      s.out_of_policy = true;
      s.reason = out_of_policy;
    }
  }

  // Removed versions answer until what replaces them is loaded: they turn
  // UNLOADING only in the entry published last.
  for (int64_t v : diff.versions_removed) {
    auto it = states.find(v);
    if (it == states.end()) continue;
    if (it->second.state == VersionState::kReady) {
      LOG_INFO << "model '" << name << "' version " << v << ": removed from disk; unloading";
      Report(name, ModelUpdateResult::kRemoved);
    }
    it->second.state = VersionState::kUnloading;
    it->second.reason = "removed from disk";
    drop.push_back({v, 0});
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
  models_.cache().Unload([&](const ModelKey& key) {
    for (const auto& [v, generation] : drop) {
      if (key.model == name && key.version == v && (generation == 0 || key.generation == generation)) return true;
    }
    return false;
  });
}

absl::Status ModelLifecycle::LoadVersion(const std::shared_ptr<const ModelEntry>& entry, int64_t version,
                                         uint64_t generation, const FileStamp& stamp) {
  // Where the model is resident now (any version), in the same dtypes (a
  // compiled package in the float32 it was exported in); on a cold start,
  // the first device `auto` prefers that the model may use.
  std::vector<std::pair<DeviceId, DType>> targets;
  for (const ResidentModel& r : models_.cache().Resident()) {
    std::pair<DeviceId, DType> target{r.key.device, stamp.package ? DType::kFloat32 : r.key.dtype};
    if (r.key.model == entry->name && std::find(targets.begin(), targets.end(), target) == targets.end()) {
      targets.push_back(target);
    }
  }
  auto add_device = [&](const DeviceInfo& info) {
    targets.push_back({info.id, RoutePlanner::ComputeDType(*entry, stamp, info.precision, Precision::kAuto)});
  };
  if (targets.empty()) {
    if (std::optional<DeviceInfo> first = RoutePlanner::ColdStartDevice(devices_, entry->config)) add_device(*first);
  }
  if (targets.empty()) {
    return absl::FailedPreconditionError("no available device is allowed for the model");
  }
  auto unload_generation = [&] {
    models_.cache().Unload([&](const ModelKey& key) { return SameGeneration(key, entry->name, version, generation); });
  };
  bool loaded_somewhere = false;
  for (size_t i = 0; i < targets.size(); ++i) {
    const auto [device, dtype] = targets[i];  // a copy: add_device may grow `targets`
    Route route;
    route.model = entry;
    route.version = version;
    route.generation = generation;
    route.stamp = stamp;
    route.requested.automatic = true;
    route.device = *devices_.Find(device);
    route.dtype = dtype;
    absl::Status s = entry->config.warmup() ? models_.WarmUp(route) : models_.Acquire(route).status();
    if (s.ok()) {
      loaded_somewhere = true;
      continue;
    }
    // What an accelerator cannot run is the device's limit, not a broken
    // file: requests fall back to the cpu as usual, so check it there.
    if (device.kind != DeviceKind::kCpu && DeviceFailureOf(s).has_value()) {
      models_.cache().Unload([&](const ModelKey& key) {
        return SameGeneration(key, entry->name, version, generation) && key.device == device;
      });
      bool cpu_listed = std::any_of(targets.begin(), targets.end(),
                                    [](const auto& t) { return t.first.kind == DeviceKind::kCpu; });
      std::optional<DeviceInfo> cpu = devices_.Find(DeviceId{DeviceKind::kCpu, 0});
      if (!cpu_listed && cpu && DeviceAllowed(entry->config, cpu->id)) add_device(*cpu);
      continue;
    }
    unload_generation();
    return s;
  }
  if (!loaded_somewhere) {
    unload_generation();
    return absl::FailedPreconditionError("no device could load the model");
  }
  return absl::OkStatus();
}

}  // namespace infergate
