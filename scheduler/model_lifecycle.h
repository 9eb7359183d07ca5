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
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "devices/device_registry.h"
#include "scheduler/config_override.h"
#include "scheduler/model_manager.h"
#include "scheduler/model_upload.h"
#include "scheduler/model_repository.h"
#include "scheduler/repository_diff.h"
#include "scheduler/repository_scan.h"
#include "scheduler/scheduler_observer.h"

namespace infergate {

class ModelLifecycle {
 public:
  ModelLifecycle(ModelRepository& repository, ModelManager& models, const DeviceRegistry& devices);

  // Acts on `now`, a scan of the whole repository. `previous` is the scan
  // before it: a model whose files changed between the two is left for the
  // next call (it may still be being written). Null acts at once.
  void Apply(const DiskRepository& now, const DiskRepository* previous);

  // Reads one model from disk and acts on it at once (an explicit LoadModel);
  // a model taken out of service by Unload is loaded again. `config_override`
  // (may be null) is laid over its config.pbtxt from now until the next
  // explicit load; one that does not make a valid config is refused with
  // INVALID_ARGUMENT before anything changes. NOT_FOUND when the model is
  // neither on disk nor served.
  // `files` (may be null): the model's files sent with the load, served
  // from a private folder instead of the repository's until the next
  // explicit load; each model file must load (on the CPU) before anything
  // changes, and a model new to the repository is served under `name`.
  absl::Status SyncModel(const std::string& name,
                         std::shared_ptr<const ConfigOverride> config_override = nullptr,
                         std::shared_ptr<const std::map<std::string, std::string>> files = nullptr);

  // An explicit unload of the whole model, as Triton's: its versions turn
  // UNAVAILABLE ("unloaded") and every resident copy is dropped (requests
  // running on one finish on it). It stays so until SyncModel, or until
  // its files change on disk. Returns the copies dropped; NOT_FOUND for a
  // model the repository does not serve.
  absl::StatusOr<size_t> Unload(const std::string& name);

  // Not owned; may be null. Set before serving.
  void SetObserver(SchedulerObserver* observer) { observer_ = observer; }

 private:
  // What the published entries were built from, refused files included.
  DiskRepository Known() const;
  static DiskModel Known(const ModelEntry& entry);
  // Forgets models and versions that were UNLOADING, and drops cached
  // copies that no READY version's generation names any more.
  void FinishUnloading();
  void Update(const ModelDiff& diff, const DiskModel* disk);
  void Remove(const std::shared_ptr<const ModelEntry>& current);
  // Loads `version` of `entry` as generation `generation` where it will be
  // needed; on failure no copy of that generation stays.
  absl::Status LoadVersion(const std::shared_ptr<const ModelEntry>& entry, int64_t version, uint64_t generation,
                           const FileStamp& stamp);
  void Report(const std::string& model, const char* result);
  // Where model `name`'s folder is: the repository's root, or the upload
  // folder it is served from (under mu_).
  std::string SourceRoot(const std::string& name) const;
  // Checks uploaded files in `dir` before they replace what serves: their
  // config (with the override) and that every model file loads.
  absl::Status CheckUpload(const std::string& name, const std::string& dir, const ConfigOverride* config_override);
  // The model's config.pbtxt in `dir`, with its load override (if any) laid over it.
  absl::StatusOr<v1::ModelConfig> ReadEffectiveConfig(const std::string& dir, const std::string& name) const;

  ModelRepository& repository_;
  ModelManager& models_;
  const DeviceRegistry& devices_;
  SchedulerObserver* observer_ = nullptr;
  std::mutex mu_;  // one update at a time
  // Config overrides of explicit loads, by model (under mu_).
  std::map<std::string, std::shared_ptr<const ConfigOverride>> overrides_;
  // Models served from files sent with a load: their model folders (under mu_).
  std::map<std::string, std::string> sources_;
  UploadFolders uploads_;
};

}  // namespace infergate
