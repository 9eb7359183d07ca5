#pragma once
// Models resident per device, keyed by (model, version, device, dtype), under
// a memory budget per device with least-recently-used eviction. Loads are
// single-flight: concurrent first requests for a key share one load. A model
// with a request in flight, or pinned by its config, is never evicted.
//
// Admission comes before the load: a model's expected footprint (its
// parameters and activation peak, learned or estimated) is reserved first,
// evicting idle models until it fits beside everything resident or being
// loaded, and the reservation is corrected to the exact parameter bytes
// before the loader places anything on the device (AdmitBytes). So the
// models on a device never hold more than its budget, not even while one
// loads. A model larger than the whole budget is refused without loading.
//
// Thread-safe. A loader runs on the thread of the first Acquire for its key;
// the others wait for it. The eviction listener runs on the thread that
// evicted, after the cache's lock is released.

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "devices/device_id.h"
#include "devices/dtype.h"
#include "scheduler/model/event_reasons.h"
#include "scheduler/model/footprint.h"
#include "scheduler/model/model_key.h"
#include "scheduler/model/servable.h"

namespace infergate {

class ModelCache {
 public:
  using Loader = std::function<absl::StatusOr<std::shared_ptr<Servable>>(const AdmitBytes& admit)>;

  // A loaded model held for one use: it is not evicted while a lease lives.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();
    const Servable& operator*() const { return *model_; }
    const Servable* operator->() const { return model_.get(); }
    bool loaded_now() const { return loaded_now_; }
    // The model was not ready when asked for: this use loaded it, or waited
    // for another's load to finish.
    bool waited_for_load() const { return waited_for_load_; }

   private:
    friend class ModelCache;
    std::shared_ptr<Servable> model_;
    std::shared_ptr<void> slot_;
    ModelCache* cache_ = nullptr;
    bool loaded_now_ = false;
    bool waited_for_load_ = false;
  };

  // Called after every eviction (for metrics and logs).
  using EvictionListener = std::function<void(const ModelKey&, uint64_t bytes, EvictionReason why)>;

  // Bytes the models resident on `device` may take; 0 = unlimited.
  void SetBudget(const DeviceId& device, uint64_t bytes);
  uint64_t Budget(const DeviceId& device) const;
  // Devices that draw on one memory (Apple silicon's CPU and MPS share the
  // unified memory): models on `member` count against `owner`'s budget
  // together with `owner`'s own, and making room on either evicts idle
  // models of both. Budget(member) then answers the shared budget.
  void ShareBudget(const DeviceId& member, const DeviceId& owner);
  void SetEvictionListener(EvictionListener listener) { listener_ = std::move(listener); }

  // The model for `key`, loading it with `loader` when absent. A failed load
  // is not cached, so a fixed file loads on the next request. Before a load,
  // least-recently-used idle unpinned models on the device are evicted until
  // `expected` fits. RESOURCE_EXHAUSTED, with the figures in the message:
  // the model alone exceeds the budget (DeviceFailure kTooLarge), or the
  // models in use, pinned or loading leave no room now (kOutOfMemory).
  absl::StatusOr<Lease> Acquire(const ModelKey& key, const Loader& loader, bool pinned = false,
                                const Footprint& expected = {});
  // The model for `key` if it is loaded, without loading it: the hot path of
  // every batch, which needs no footprint or file path when the copy is
  // resident (as Acquire, it counts as a use). nullopt while absent or loading.
  std::optional<Lease> AcquireResident(const ModelKey& key);

  // A resident copy's activation peak, measured by a run (warm-up): it
  // counts against the budget from now on, and idle models are evicted to
  // make room for it if need be.
  void SetActivationBytes(const ModelKey& key, uint64_t bytes);

  // Evicts every idle unpinned model on `device` except `keep`; returns how
  // many. Used to make room after an out-of-memory error.
  size_t EvictIdle(const DeviceId& device, const ModelKey* keep, EvictionReason why);
  // Evicts the idle unpinned resident copies for which `match` is true (a
  // copy in use or pinned stays); returns how many went.
  size_t EvictIdleCopies(const std::function<bool(const ModelKey&)>& match, EvictionReason why);

  // Drops every resident key for which `match` is true (pinned or not);
  // returns how many. Requests already holding a lease finish on the dropped
  // copy, whose memory is freed when the last of them ends.
  size_t Unload(const std::function<bool(const ModelKey&)>& match);

  // Bytes `device`'s budget lends to something other than a resident copy
  // (host copies of weights, host_copy_store.h): they count beside the
  // copies, and idle copies are evicted to make room for them.
  // RESOURCE_EXHAUSTED, naming `what`, when they cannot fit. Returned with
  // ReleaseOutsideCopies.
  absl::Status HoldOutsideCopies(const DeviceId& device, uint64_t bytes, const std::string& what);
  void ReleaseOutsideCopies(const DeviceId& device, uint64_t bytes);
  uint64_t HeldOutsideCopies(const DeviceId& device) const;

  std::vector<ResidentModel> Resident() const;
  bool IsResident(const ModelKey& key) const;
  uint64_t ResidentBytes(const DeviceId& device) const;

 private:
  using Result = absl::StatusOr<std::shared_ptr<Servable>>;
  // Every field is under mu_.
  struct Slot {
    std::shared_future<Result> result;
    bool ready = false;  // loaded; until then `bytes` is the load's reservation
    bool pinned = false;
    uint64_t bytes = 0;  // counted against the budget: parameters + activation peak
    uint64_t activation_bytes = 0;
    uint64_t last_used = 0;
    int in_flight = 0;
    std::chrono::steady_clock::time_point ready_at;
  };
  using Evicted = std::vector<std::pair<ModelKey, std::shared_ptr<Slot>>>;
  void Release(const std::shared_ptr<void>& slot);
  // Bytes held on `device` by resident and loading models other than `except`.
  uint64_t HeldLocked(const DeviceId& device, const ModelKey* except) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts LRU idle unpinned slots on `device` (never `keep`) until the
  // bytes held by the others <= target. Returns the evicted entries;
  // `held`, when set, receives what the others hold afterwards.
  Evicted EvictLocked(const DeviceId& device, uint64_t target, const ModelKey* keep, uint64_t* held = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What making room found on a device's budget: the budget (0: unlimited)
  // and what the others held after the evictions.
  struct Room {
    uint64_t budget = 0;
    uint64_t held = 0;
    bool Fits(uint64_t bytes) const { return budget == 0 || (bytes <= budget && held + bytes <= budget); }
  };
  // Evicts idle unpinned copies on `device` (never `keep`) until `bytes`
  // more fit its budget; none when the budget is unlimited, or smaller
  // than `bytes` alone (nothing would make room). The one place both a
  // model's admission and the host copies' hold make room.
  Room EvictForLocked(const DeviceId& device, uint64_t bytes, const ModelKey* keep, Evicted* evicted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts until `bytes` for `key` fit beside the other models on its
  // device, or says why they cannot. `source` says where `bytes` came from.
  absl::Status MakeRoomLocked(const ModelKey& key, uint64_t bytes, const std::string& source, Evicted* evicted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify(const Evicted& evicted, EvictionReason why);
  // The device whose budget `device` draws on (itself unless shared).
  const DeviceId& BudgetOwnerLocked(const DeviceId& device) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  std::map<ModelKey, std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  std::map<DeviceId, uint64_t> budgets_ ABSL_GUARDED_BY(mu_);       // by budget owner
  std::map<DeviceId, DeviceId> budget_owner_ ABSL_GUARDED_BY(mu_);  // devices sharing another's budget
  std::map<DeviceId, uint64_t> outside_ ABSL_GUARDED_BY(mu_);       // held outside copies, by budget owner
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
  EvictionListener listener_;
};

}  // namespace infergate
