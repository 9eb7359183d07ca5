#pragma once
// What ModelMesh has placed on this runtime, kept consistent with what is
// served under the rules of its SPI:
//
//   loadModel     answers once the model serves, with the bytes it holds in
//                 the cache; a second load of a loaded id answers the same
//   cancelled     a load ModelMesh gave up on (its call cancelled, or an
//                 unloadModel that came while it ran) is undone once it
//                 finishes, so nothing of it stays resident
//   failed load   undone too: a failed model leaves no entry behind
//   unloadModel   answers once the model is gone; waits for a load of the
//                 same id still running, which is then undone; OK for an id
//                 never loaded
//   runtimeStatus unloads everything (ModelMesh restarted and its view of
//                 this runtime starts empty)
//
// The core's part comes as a Backend, so the rules are tested without
// models. Threading: every method may be called from any thread and blocks
// until done; Backend calls are made without this object's lock held.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"

namespace infergate {

class ModelMeshModels {
 public:
  struct Backend {
    // Serves the model folder `folder` as model `id`; returns once it
    // serves (or why not).
    std::function<absl::Status(const std::string& id, const std::string& folder)> load;
    // Takes model `id` out of service altogether; nothing of it stays.
    std::function<void(const std::string& id)> forget;
    // The bytes model `id`'s resident copies hold in the cache.
    std::function<uint64_t(const std::string& id)> resident_bytes;
  };

  explicit ModelMeshModels(Backend backend) : backend_(std::move(backend)) {}

  // Loads `folder` as `id` and returns its resident bytes. `cancelled` is
  // asked once the load finished: true undoes it (CANCELLED).
  // FAILED_PRECONDITION, before anything is tried, while the same id is
  // still loading.
  absl::StatusOr<uint64_t> Load(const std::string& id, const std::string& folder,
                                const std::function<bool()>& cancelled);
  // Returns once `id` is not served.
  void Unload(const std::string& id);
  // Unloads every model ModelMesh placed; returns how many there were.
  size_t UnloadAll();
  // The resident bytes of a loaded model; NOT_FOUND when it is not loaded.
  absl::StatusOr<uint64_t> Size(const std::string& id) const;
  // Loaded ids, in order.
  std::vector<std::string> Loaded() const;

 private:
  enum class State { kLoading, kLoaded, kUnloading };
  struct Placed {
    State state = State::kLoading;
    bool unload_requested = false;  // while loading: undo when done
  };
  // Takes a loaded or failed model out (the caller marked it kUnloading).
  void Drop(const std::string& id);

  const Backend backend_;
  mutable Mutex mu_;
  std::condition_variable changed_;  // a model left kLoading or was erased
  std::map<std::string, Placed> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infergate
