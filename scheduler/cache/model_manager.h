#pragma once
// Model management: which copies of which models are resident on which
// device, loading them (single-flight, under per-device budgets), explicit
// unloads, and warm-up runs. What is loaded when the repository changes is
// decided by the model lifecycle (model_lifecycle.h), which loads through here.
//
// Thread-safe. Loads run on the thread that first asks for a model (a
// device worker, or the starting thread for warm-up); the observer is
// called on that thread and must not block.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/cache/model_cache.h"
#include "scheduler/cache/model_footprints.h"
#include "scheduler/model/host_copy_store.h"
#include "scheduler/model/inference_types.h"
#include "scheduler/model/load_source.h"
#include "scheduler/model/route.h"
#include "scheduler/model/scheduler_observer.h"
#include "scheduler/model/servable.h"
#include "scheduler/model/warmup_samples.h"
#include "scheduler/repository/model_repository.h"

namespace infergate {

class ModelManager {
 public:
  // How many batches of a model may run at once on a device: the model
  // instances the default loader opens an AOTInductor package with (an
  // instance runs one call at a time; aoti_model.h). Empty: 1.
  using RunsAtOnce = std::function<int(const DeviceId& device, const v1::ModelConfig& config)>;

  // Nothing is owned; the repository (and `footprints`, which may be null:
  // then models are admitted by the estimate from their file) must outlive
  // the manager. `loader` empty means the default: TorchScript
  // (TorchScriptModel::Load), or AotiModel::Load for a .pt2 package.
  ModelManager(ModelRepository& repository, ServableLoader loader, ModelFootprints* footprints = nullptr,
               RunsAtOnce runs_at_once = nullptr);

  // Host copies of loaded weights (host_copy_store.h), with the default
  // loader: a TorchScript model loaded onto a device other than the CPU
  // leaves its weights as read in host memory, up to `share` of the CPU's
  // cache budget (counted in it), and later loads of the same file start
  // from there. Off (0) unless set; before the first load.
  void SetHostCopyShare(double share) { host_copy_share_ = share; }
  // Whether a CPU load keeps a host copy too (with a share set): for a
  // server whose models may move onto an accelerator, so a model first
  // loaded on the CPU moves from host memory, not its file. Before the
  // first load.
  void SetHostCopiesOfCpuLoads(bool keep) { host_copies_of_cpu_loads_ = keep; }
  const HostCopyStore& host_copies() const { return host_copies_; }
  // Whether a load of `route` would start from a host copy now.
  bool HasHostCopy(const Route& route) const;

  // What a config's warm-up samples may take (warmup_samples.h); before
  // the first load.
  void SetWarmupLimits(const WarmupLimits& limits) { warmup_limits_ = limits; }

  // The servable for `route`, loaded if it is not resident. A load reads
  // only the file the route's generation was published for, and is
  // admitted to the device by the model's learned footprint (or the
  // estimate from its file) before it starts; see ModelCache::Acquire.
  absl::StatusOr<ModelCache::Lease> Acquire(const Route& route);

  // Brings a route planned earlier (a request that waited in a queue) up to
  // date with the repository view: the newest file of its version and, with
  // `follow_latest` for a request that asked for the latest version, the
  // version now latest. The copies the route was planned for may be gone by
  // then. True if the route changed; when false, `route` is left untouched.
  bool Refresh(Route& route, bool follow_latest) const;

  // What the repository now answers a request for `route`'s model and
  // version (the latest, with `follow_latest` for a request that asked for
  // it), as a new request would be told: OK while that version is served,
  // else why not ("was removed from the model repository", "is
  // unloading: ..."). A batch whose copy was unloaded under it, and whose
  // file is gone, reports this rather than the missing file.
  absl::Status RepositoryAnswer(const Route& route, bool follow_latest) const;

  // Drops matching resident copies; empty version/device and AUTO precision
  // match all. NOT_FOUND when nothing matched and the model is unknown.
  absl::StatusOr<size_t> Unload(const LoadRequest& request);

  // Runs a loaded model on its config's warm-up samples (each `count`
  // times; warmup_samples.h), or else once on zeros of its declared shapes
  // (batch of 1), so the first client does not pay for lazy
  // initialisation, and measures the runs' activation peak, which counts
  // against the device's budget from then on and is learned for later
  // loads. When the listener wants it, the last input runs once more,
  // timed: the copy's latency known before its first request. Without
  // samples, OK without running when the inputs are not fully declared (or
  // take strings); a sample that cannot be made or run fails the warm-up,
  // naming it.
  absl::Status WarmUp(const Route& route);

  // Loads the model file at `path` under `config` on `device` in FP32 and
  // drops it again: whether it loads at all, before it is published.
  absl::Status CheckLoads(const std::string& path, const v1::ModelConfig& config, const DeviceInfo& device) const;

  // Each device's cache budget, set once at start (ModelCache::SetBudget,
  // ShareBudget: a device computing in host memory counts against the CPU's).
  void SetBudget(const DeviceId& device, uint64_t bytes) { cache_.SetBudget(device, bytes); }
  void ShareBudget(const DeviceId& member, const DeviceId& owner) { cache_.ShareBudget(member, owner); }
  uint64_t Budget(const DeviceId& device) const { return cache_.Budget(device); }

  std::vector<ResidentModel> Resident() const { return cache_.Resident(); }
  bool IsResident(const ModelKey& key) const { return cache_.IsResident(key); }

  uint64_t ResidentBytes(const DeviceId& device) const { return cache_.ResidentBytes(device); }
  // What `route`'s copy is expected to take on its device (learned, or
  // estimated from its file).
  Footprint ExpectedFootprint(const Route& route) const { return Expected(route); }
  // Evicts the idle unpinned copies `match` names (ModelCache::EvictIdleCopies).
  size_t EvictIdleCopies(const std::function<bool(const ModelKey&)>& match, EvictionReason why) {
    return cache_.EvictIdleCopies(match, why);
  }

  // Told of every load that finished (on the loading thread, with what it
  // took and where it started) and every eviction (on the evicting thread,
  // after the cache's lock is released). Set before serving; must not
  // block.
  struct Listener {
    std::function<void(const ModelKey& key, uint64_t took_us, LoadSource source)> loaded;
    std::function<void(const ModelKey& key, EvictionReason why)> evicted;
    // Warm-ups that measure: asked after a warm-up of `key` (on the warming
    // thread), it returns where a timed run's wall time, the warming
    // thread's CPU time and the run's rows (its first input's first
    // dimension) go when one is wanted (its latency there is not known
    // yet), else an empty function: no timed run.
    using TimedRunSink = std::function<void(uint64_t wall_us, uint64_t cpu_us, int64_t rows)>;
    std::function<TimedRunSink(const ModelKey& key)> timed_run;
  };
  void SetListener(Listener listener) { listener_ = std::move(listener); }

  // Makes room on `device` after it ran out of memory: every idle copy but
  // `keep` goes. Returns how many.
  size_t EvictIdleAfterOom(const DeviceId& device, const ModelKey& keep);

  // Dropping resident copies. Requests running on a dropped copy finish on
  // it; each returns how many went.
  // Every copy of `model`.
  size_t DropModel(const std::string& model);
  // Copies of `model`'s versions: `generation` 0 matches every generation of
  // the version, and a `device` limits it to that device.
  struct VersionCopies {
    int64_t version = 0;
    uint64_t generation = 0;
    std::optional<DeviceId> device;
  };
  size_t DropVersions(const std::string& model, const std::vector<VersionCopies>& copies);
  // Copies that no READY version's generation names any more: versions that
  // left the policy or the repository, or copies loaded again for a request
  // planned just before their version was swapped out.
  size_t DropUnserved();

  // Not owned; may be null. Set before serving. Gets every event of the
  // cache too (loads, lookups, evictions).
  void SetObserver(SchedulerObserver* observer) { observer_ = observer; }

 private:
  // The warm-up runs themselves (each tensors, times), on `model`.
  absl::Status RunWarmUp(const Route& route, ModelCache::Lease model,
                         const std::vector<std::pair<std::vector<at::Tensor>, uint32_t>>& runs);
  static absl::Status SameFile(const Route& route, const std::string& path);
  // After a load of `route` finished: when an explicit unload or the
  // model's removal took it out of service while the load ran (a request
  // held for its load on arrival, a worker's load, a move), the new copy
  // and its host copy are dropped again. Unload and Remove dropped what was
  // resident when they ran; a copy landing after them would hold its
  // device's budget for a model nobody may ask for. The requests that
  // waited for the load still run on it (their leases keep it).
  void DropIfOutOfService(const Route& route);

  // The footprint `route` is expected to take on its device.
  Footprint Expected(const Route& route) const;

  // What a load of `route`'s file at `path` may do with host copies: none
  // when they are off or loader_ is set (no store), else start from the
  // copy of that file and, onto an accelerator, keep one. The one decision
  // both the published-file check and the load follow.
  HostCopyUse HostCopyUseFor(const Route& route, const std::string& path);
  // A load of `route`'s file at `path` (model-side config `config`)
  // through loader_, or the default loader with `host`.
  absl::StatusOr<std::shared_ptr<Servable>> LoadCopy(const Route& route, const std::string& path,
                                                     const v1::ModelConfig& config, const AdmitBytes& admit,
                                                     const HostCopyUse& host);
  // The default loader (LoadServable, with the model instances RunsAtOnce
  // gives), `host` as LoadCopy or CheckLoads decides.
  absl::StatusOr<std::shared_ptr<Servable>> DefaultLoad(const std::string& path, const v1::ModelConfig& config,
                                                        const DeviceInfo& device, DType dtype, const AdmitBytes& admit,
                                                        const HostCopyUse& host) const;

  ModelRepository& repository_;
  ServableLoader loader_;  // empty: the default (LoadServable, with host copies)
  RunsAtOnce runs_at_once_;
  double host_copy_share_ = 0;
  bool host_copies_of_cpu_loads_ = false;
  ModelFootprints* footprints_;
  ModelCache cache_;
  HostCopyStore host_copies_;  // after cache_, whose budget it draws on
  SchedulerObserver* observer_ = nullptr;
  Listener listener_;
  WarmupLimits warmup_limits_;
};

}  // namespace infergate
