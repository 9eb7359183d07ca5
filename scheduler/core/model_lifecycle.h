#pragma once
// The model lifecycle: turns what changed in the repository on disk into
// what is served, without failing a request.
//
//   new version / new file   loaded (and warmed up where configured) on every
//                            device where the model is resident, or on the
//                            device `auto` picks on a cold start, before it
//                            is published; the old copy is dropped after, and
//                            requests in flight finish on it
//   broken file or config    never published: the last good one keeps
//                            answering; the version (or model) says why
//   version_policy           latest N (versions that fail do not count), all,
//                            specific; the rest are UNAVAILABLE with a reason
//   removed version / model  UNLOADING for one poll, then gone
//
// Each outcome is logged once (a refused file is not tried again until it
// changes) and reported to the observer.
//
// Threading: Apply and SyncModel may be called from any thread; one update
// runs at a time. Loads run on the calling thread (the poller's, or the
// LoadModel task's), never on a request path. The repository, the model
// manager and the devices are not owned and must outlive this object.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/mutex.h"
#include "devices/device_registry.h"
#include "scheduler/cache/model_manager.h"
#include "scheduler/model/scheduler_observer.h"
#include "scheduler/repository/config_override.h"
#include "scheduler/repository/model_repository.h"
#include "scheduler/repository/model_upload.h"
#include "scheduler/repository/repository_diff.h"
#include "scheduler/repository/repository_scan.h"
#include "scheduler/repository/version_plan.h"

namespace infergate {

// A Triton config's instance groups name GPUs among `devices` (Triton's
// rule and words: triton_config_rules.h); OK for infergate's configs. The
// repository's config check (ModelRepository::SetConfigCheck).
absl::Status TritonGpusPresent(const v1::ModelConfig& config, const DeviceRegistry& devices);

class ModelLifecycle {
 public:
  ModelLifecycle(ModelRepository& repository, ModelManager& models, const DeviceRegistry& devices);

  // Acts on `now`, a scan of the whole repository. `previous` is the scan
  // before it: a model whose files changed between the two is left for the
  // next call (it may still be being written). Null acts at once.
  void Apply(const DiskRepository& now, const DiskRepository* previous);

  // Where an explicit load's model folder comes from; both empty: the
  // repository's folder of that name.
  struct Source {
    // The model's files sent with the load, by path inside its folder
    // ("1/model.pt"): written to a fresh private folder and served from
    // there; each model file must load (on the CPU) before anything changes.
    std::shared_ptr<const std::map<std::string, std::string>> files;
    // A model folder outside the repository, served in place under the
    // load's name, whatever the folder is called and whatever name its
    // config.pbtxt gives (ModelMesh's loadModel). Never written or removed.
    std::string folder;
  };

  // Reads one model from disk and acts on it at once (an explicit LoadModel);
  // a model taken out of service by Unload is loaded again. `config_override`
  // (may be null) is laid over its config.pbtxt from now until the next
  // explicit load; one that does not make a valid config is refused with
  // INVALID_ARGUMENT before anything changes. NOT_FOUND when the model is
  // neither on disk nor served. A model served from a `source` folder stays
  // so until the next explicit load (or Forget); the repository's poll
  // leaves it alone.
  absl::Status SyncModel(const std::string& name, std::shared_ptr<const ConfigOverride> config_override = nullptr,
                         Source source = {});

  // An explicit unload of the whole model, as Triton's: its versions turn
  // UNAVAILABLE ("unloaded") and every resident copy is dropped (requests
  // running on one finish on it). It stays so until SyncModel, or until
  // its files change on disk. Returns the copies dropped; NOT_FOUND for a
  // model the repository does not serve.
  absl::StatusOr<size_t> Unload(const std::string& name);

  // Takes the model out of the repository altogether, as if its folder had
  // been removed: every resident copy is dropped (requests running on one
  // finish on it), its entry, override and source folder are forgotten, and
  // later requests get NOT_FOUND. For models ModelMesh placed here, which
  // come and go by the thousand. OK when the model is not there.
  void Forget(const std::string& name);

  // Marks `version` of `name` UNAVAILABLE with `why` and drops its copies:
  // a version whose warm-up samples failed at start-up does not serve (as a
  // load whose warm-up fails, as in Triton). OK when the model is gone.
  void FailVersion(const std::string& name, int64_t version, const absl::Status& why);

  // Not owned; may be null. Set before serving.
  void SetObserver(SchedulerObserver* observer) { observer_ = observer; }

 private:
  // What the published entries were built from, refused files included.
  DiskRepository Known() const;
  static DiskModel Known(const ModelEntry& entry);
  // Forgets models and versions that were UNLOADING, and drops cached
  // copies that no READY version's generation names any more.
  void FinishUnloading();
  // Acts on one model's change: reads its config again where needed,
  // carries out the versions' plan (version_plan.h), publishes the result
  // and only then drops the copies it replaced.
  void Update(const ModelDiff& diff, const DiskModel* disk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads `entry`'s config again when `diff` (or a version that moved,
  // which may change what a package completes it with) calls for it; a
  // refused or broken config is recorded in `entry`. True when a config
  // that reads differently now applies.
  bool UpdateConfig(ModelEntry& entry, const ModelEntry* current, const ModelDiff& diff, const DiskModel& disk)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One model's update in progress: the entry to publish, its versions'
  // states as they change, and the copies to drop once it is published.
  struct UpdateStep {
    std::shared_ptr<ModelEntry> entry;
    std::map<int64_t, VersionStatus>& states;
    const DiskModel& disk;
    std::vector<ModelManager::VersionCopies> drop;
  };
  // Carries out one planned step; false when a version that was not served
  // failed to load, which calls for a new plan.
  bool CarryOut(const VersionStep& planned, UpdateStep& step);
  bool LoadStep(bool serving, VersionStatus& status, UpdateStep& step);
  void Remove(const std::shared_ptr<const ModelEntry>& current) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Loads `version` of `model` as generation `generation` where the route
  // planner puts an update (RoutePlanner::UpdateTargets); on failure no
  // copy of that generation stays.
  absl::Status LoadVersion(const std::shared_ptr<const ModelEntry>& model, int64_t version, uint64_t generation,
                           const FileStamp& stamp);
  void Report(const std::string& model, ModelUpdateResult result);
  // A model folder served instead of the repository's.
  struct SourceFolder {
    std::string dir;
    bool owned = false;  // an upload folder: removed once nothing serves from it
    ConfigNaming naming = ConfigNaming::kMatchesFolder;
  };
  // Where model `name`'s folder is: the repository's, or the one it is
  // served from instead, and how its config's name is read.
  SourceFolder FolderOf(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(const SourceFolder& folder);
  // Checks uploaded files in `dir` before they replace what serves: their
  // config (with the override) and that every model file loads.
  absl::Status CheckUpload(const std::string& name, const std::string& dir, const ConfigOverride* config_override);
  // The model's config.pbtxt in its folder, with its load override (if any) laid over it.
  absl::StatusOr<v1::ModelConfig> ReadEffectiveConfig(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ModelRepository& repository_;
  ModelManager& models_;
  const DeviceRegistry& devices_;
  SchedulerObserver* observer_ = nullptr;
  Mutex mu_;  // one update at a time
  // Config overrides of explicit loads, by model.
  std::map<std::string, std::shared_ptr<const ConfigOverride>> overrides_ ABSL_GUARDED_BY(mu_);
  // Models served from another folder than the repository's: files sent
  // with a load, or ModelMesh's folders.
  std::map<std::string, SourceFolder> sources_ ABSL_GUARDED_BY(mu_);
  UploadFolders uploads_;
};

}  // namespace infergate
