#include "service/modelmesh/model_mesh_models.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace infergate {

absl::StatusOr<uint64_t> ModelMeshModels::Load(const std::string& id, const std::string& folder,
                                               const std::function<bool()>& cancelled) {
  {
    UniqueMutexLock lock(mu_);
    // An unload of the same id still running finishes first.
    changed_.wait(lock.native(), [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      auto it = models_.find(id);
      return it == models_.end() || it->second.state != State::kUnloading;
    });
    auto it = models_.find(id);
    if (it != models_.end() && it->second.state == State::kLoading) {
      return absl::FailedPreconditionError(
          absl::StrCat("modelId: '", id.substr(0, 128), "' is being loaded already; nothing new was tried"));
    }
    if (it == models_.end()) {
      models_[id] = Placed{};
    } else {
      lock.Unlock();
      return backend_.resident_bytes(id);  // loaded already: the same answer again
    }
  }
  absl::Status loaded = backend_.load(id, folder);
  bool undo = !loaded.ok() || cancelled();
  {
    MutexLock lock(mu_);
    Placed& placed = models_[id];
    undo = undo || placed.unload_requested;
    placed.state = undo ? State::kUnloading : State::kLoaded;
  }
  if (!undo) {
    changed_.notify_all();
    return backend_.resident_bytes(id);
  }
  Drop(id);
  if (!loaded.ok()) return loaded;
  LOG_INFO << "ModelMesh model '" << id << "': load cancelled; unloaded again";
  return absl::CancelledError(absl::StrCat("modelId: '", id.substr(0, 128), "': the load was cancelled and undone"));
}

void ModelMeshModels::Drop(const std::string& id) {
  backend_.forget(id);
  {
    MutexLock lock(mu_);
    models_.erase(id);
  }
  changed_.notify_all();
}

void ModelMeshModels::Unload(const std::string& id) {
  UniqueMutexLock lock(mu_);
  for (;;) {
    auto it = models_.find(id);
    if (it == models_.end()) return;
    if (it->second.state == State::kLoaded) {
      it->second.state = State::kUnloading;
      lock.Unlock();
      Drop(id);
      return;
    }
    // Loading: the load undoes itself when it finishes. Unloading: another
    // caller is dropping it. Either way, wait until it is gone or loaded.
    if (it->second.state == State::kLoading) it->second.unload_requested = true;
    changed_.wait(lock.native());
  }
}

size_t ModelMeshModels::UnloadAll() {
  std::vector<std::string> ids;
  {
    MutexLock lock(mu_);
    for (const auto& [id, placed] : models_) ids.push_back(id);
  }
  for (const std::string& id : ids) Unload(id);
  return ids.size();
}

absl::StatusOr<uint64_t> ModelMeshModels::Size(const std::string& id) const {
  {
    MutexLock lock(mu_);
    auto it = models_.find(id);
    if (it == models_.end() || it->second.state != State::kLoaded) {
      return absl::NotFoundError(absl::StrCat("modelId: '", id.substr(0, 128), "' is not loaded"));
    }
  }
  return backend_.resident_bytes(id);
}

std::vector<std::string> ModelMeshModels::Loaded() const {
  MutexLock lock(mu_);
  std::vector<std::string> ids;
  for (const auto& [id, placed] : models_) {
    if (placed.state == State::kLoaded) ids.push_back(id);
  }
  return ids;
}

}  // namespace infergate
