#include "scheduler/core/core_parts.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "devices/simulation.h"
#include "devices/torch_probe.h"
#include "scheduler/core/request_dispatcher.h"
#include "scheduler/core/thread_sizing.h"
#include "scheduler/routing/ready_path.h"
#include "scheduler/routing/staging_eviction.h"

namespace infergate {

CoreParts::CoreParts(std::string repository_root, DeviceRegistry device_registry, SchedulerOptions sized_options,
                     ServableLoader loader)
    : options(std::move(sized_options)),
      repository(std::move(repository_root)),
      devices(std::move(device_registry)),
      state_file(std::make_shared<StateFile>(options.state_file)),
      learned(state_file, TorchVersion()),
      footprints(state_file, TorchVersion()),
      models(repository, std::move(loader), &footprints,
             [this](const DeviceId& device, const v1::ModelConfig& config) {
               return ModelRunsAtOnce(options, device.kind, config);
             }),
      accuracy_ledger(state_file, TorchVersion()),
      checker(models, repository, devices, accuracy_ledger, PrecisionChecker::Options{options.precision_checks},
              [this] {
                DeviceExecutor* cpu = executors.Find(kCpuDevice);
                return cpu && cpu->queue_depth() == 0 && cpu->in_flight() == 0;
              }),
      planner(
          repository, devices, learned, options.router,
          [this](const Route& there, RouteCandidate* c) {
            const ModelKey key = there.key();
            c->latency_us = latency.Expected(key.model, key.device);
            if (DeviceExecutor* ex = executors.Find(key.device)) {
              c->queued = ex->queue_depth();
              c->running = ex->in_flight();
              c->workers = ex->workers();
              DeviceLoad load = ex->LoadFor(FlowKey{key.model, there.version});
              load.job_us = c->latency_us.value_or(0.0);
              c->starts_in_us = ExpectedStartUs(load);
            }
            // `key` names the dtype a request would be served in there
            // (the accuracy contract applied): a copy in another is not it.
            c->resident = models.IsResident(key);
            c->demoted = !c->resident && placement.Demoted(key.model, key.device);
            if (!c->resident && key.device.kind != DeviceKind::kCpu) c->load_us = LoadAndRunEstimateUs(there);
          },
          &checker),
      lifecycle(repository, models, devices),
      demand(options.demand),
      staging_demand(DemandMeter::Options{options.staging_demand_window, options.demand.change_threshold,
                                          options.demand.min_change_interval}),
      placement(
          PlacementController::Hooks{
              [this] { return Accelerators(); }, [this](const DeviceId& device) { return PlacementInputs(device); },
              [this](const std::string& model) { return KeepOnCpu(model); },
              [this](const std::string& model, const DeviceId& device) { return Demote(model, device); },
              [this](const std::string& model, const DeviceId& device) { return Promote(model, device); }},
          options.placement),
      executors(
          devices.Snapshot(), options, [this](DeviceExecutor::Batch& batch) { dispatcher->RunQueued(batch); },
          [this](const DeviceId& device, const Job& job, RejectionReason reason) {
            observer->OnRejected(device, job.model_label, reason);
          }) {
  repository.SetConfigCheck([this](const v1::ModelConfig& config) { return TritonGpusPresent(config, devices); });
  WarmupLimits warmup;
  warmup.max_elements = options.max_tensor_elements;
  models.SetWarmupLimits(warmup);
  models.SetHostCopyShare(options.host_copy_share);
  if (options.background_moves) {
    // Models may move onto an accelerator: one first loaded on the cpu keeps
    // its weights in host memory too, so its first move (and a request's
    // load and run) starts there, not from its file.
    models.SetHostCopiesOfCpuLoads(!Accelerators().empty());
    planner.SetMoveWanted([this] { placement.Wake(); });
    ModelManager::Listener listener;
    listener.loaded = [this](const ModelKey& key, uint64_t took_us, LoadSource source) {
      if (key.device.kind != DeviceKind::kCpu)
        placement.RecordLoadTime(key.model, key.device, source, static_cast<double>(took_us));
    };
    listener.evicted = [this](const ModelKey& key, EvictionReason why) {
      // Made room for another load (or after running out of memory): it
      // keeps answering from a CPU copy. Demotions are the controller's own.
      if (key.device.kind != DeviceKind::kCpu && (why == EvictionReason::kBudget || why == EvictionReason::kOom)) {
        placement.NoteEvicted(key.model, key.device);
      }
    };
    // A copy warmed up before its model's latency there is known times one
    // more run (ModelManager::WarmUp), so the first requests after a load
    // or a move are routed on a measurement, not on a guess. Counted as a
    // request's run is (RequestDispatcher::Execute): wall time, plus on a
    // CPU simulated slower what such a CPU holds the run for beyond it.
    listener.timed_run = [this](const ModelKey& key) -> ModelManager::Listener::TimedRunSink {
      if (latency.Expected(key.model, key.device).has_value()) return nullptr;
      return [this, key](uint64_t wall_us, uint64_t cpu_us, int64_t rows) {
        double micros = static_cast<double>(wall_us);
        if (key.device.kind == DeviceKind::kCpu) {
          micros += SimulatedCpuExtraUs(key, rows, wall_us, cpu_us);
        }
        latency.Seed(key.model, key.device, micros);
      };
    };
    models.SetListener(std::move(listener));
  }
  if (absl::Status s = learned.Load(); !s.ok()) {
    LOG_WARNING << s.message() << "; starting with no learned device limits";
  }
  if (absl::Status s = footprints.Load(); !s.ok()) {
    LOG_WARNING << s.message() << "; starting with no learned model sizes";
  }
  if (absl::Status s = accuracy_ledger.Load(); !s.ok()) {
    LOG_WARNING << s.message() << "; starting with no accuracy check results";
  }
  for (const DeviceInfo& d : devices.Snapshot()) {
    if (!d.available) continue;
    auto budget = options.cache_budgets.find(d.id);
    uint64_t bytes =
        budget != options.cache_budgets.end()
            ? budget->second
            : static_cast<uint64_t>(static_cast<double>(d.memory_total_bytes) * options.cache_budget_fraction);
    models.SetBudget(d.id, bytes);
    // Apple silicon's MPS computes in the same memory as the CPU: one budget
    // for both (the CPU's), not a fraction of that memory each.
    const bool shares_host_memory = d.id.kind == DeviceKind::kMps && !d.simulated;
    if (shares_host_memory) models.ShareBudget(d.id, kCpuDevice);
    const DeviceExecutor* executor = executors.Find(d.id);
    LOG_INFO << "device " << d.id.ToString() << ": " << (executor ? executor->workers() : 0)
             << " worker(s), model cache budget "
             << (shares_host_memory ? "shared with the cpu (one memory)" : absl::StrCat(bytes, " bytes"));
  }
}

}  // namespace infergate

namespace infergate {

MoveInputs CoreParts::PlacementInputs(const DeviceId& device) {
  MoveInputs in;
  const uint64_t budget = models.Budget(device);
  in.device_budget_bytes = budget == 0 ? UINT64_MAX / 2 : budget;  // 0: unlimited
  in.budget_bytes = in.device_budget_bytes;
  if (budget > 0 && StagingOn()) {
    // The staging share is left to the requests' load and run.
    in.budget_bytes = static_cast<uint64_t>(static_cast<double>(budget) * (1 - options.staging_share));
  }
  const Clock::time_point now = Clock::now();
  std::map<std::string, std::vector<ResidentModel>> copies;  // on `device`, by model
  for (ResidentModel& r : models.Resident()) {
    if (r.key.device == device) copies[r.key.model].push_back(std::move(r));
  }
  std::map<std::string, double> rates;
  for (const auto& [model, rate] : demand.Rates(now)) rates[model] = rate;
  std::set<std::string> names;
  for (const auto& [name, list] : copies) names.insert(name);
  for (const auto& [name, rate] : rates) names.insert(name);
  for (const std::string& name : names) {
    MoveCandidate c;
    c.model = name;
    c.demand_per_second = rates.count(name) ? rates[name] : 0;
    // The copy a request would be served by there: the latest version, in
    // the dtype the accuracy contract gives it now.
    absl::StatusOr<Route> there =
        planner.Plan({name, "", device.ToString(), Precision::kAuto, /*allow_fallback=*/false});
    const std::vector<ResidentModel>& held = copies[name];
    for (const ResidentModel& r : held) {
      if (there.ok() && r.key != there->key()) continue;  // another dtype or version: not the one served
      const double for_s = std::chrono::duration<double>(now - r.ready_since).count();
      c.resident_for_s = c.resident ? std::min(c.resident_for_s, for_s) : for_s;
      c.resident = true;
      c.bytes += r.bytes;
      c.pinned = c.pinned || r.pinned;
    }
    if (!c.resident && !there.ok()) continue;  // it may not (or cannot) run there
    if (!c.resident) c.bytes = models.ExpectedFootprint(*there).total();
    if (there.ok()) c.next_load = NextLoadSource(*there);
    c.elsewhere_us = latency.Mean(name, kCpuDevice).value_or(options.router.unmeasured_latency_us);
    c.accelerator_us =
        latency.Mean(name, device).value_or(c.elsewhere_us / std::max(1.0, options.router.assumed_accelerator_speedup));
    c.transfer_us = EstimatedTransferUs(device, c.bytes);
    // Off the accelerator a request may load it and run there instead (the
    // rule with load and run; the tail-set objective weighs that path).
    if (options.router.load_and_run) c.load_and_run_us = c.transfer_us + c.accelerator_us;
    in.models.push_back(std::move(c));
  }
  return in;
}

std::optional<double> CoreParts::OwnLoadUs(const Route& there, uint64_t bytes) const {
  const ModelKey key = there.key();
  // The load a request would start now: from the host copy when there is
  // one (what a load from the file took, its reading and deserialising,
  // says nothing of it), else from the file. Never loaded there from that
  // source: a file's reading, deserialisation and warm-up are not guessed;
  // from a host copy a load is its transfer, which is.
  const LoadSource source = NextLoadSource(there);
  std::optional<double> load = placement.LoadTime(key.model, key.device, source);
  if (!load && source == LoadSource::kHostCopy) load = TransferAloneUs(key.device, bytes);
  return load;
}

std::optional<double> CoreParts::LoadAndRunEstimateUs(const Route& there) const {
  const ModelKey key = there.key();
  const uint64_t needed = models.ExpectedFootprint(there).total();
  // With load on arrival the request's load runs on its device's lane
  // (arrival_loads.h), behind the one running there and those waiting; a
  // load of its model already running there is one it would join.
  ArrivalLoads::Ahead lane;
  if (options.router.load_on_arrival) lane = arrival_loads.Before(key.device.ToString(), key.ToString());
  if (lane.key_running) return lane.running_left_us;
  std::optional<double> load = OwnLoadUs(there, needed);
  if (!load) return std::nullopt;
  // Into room the device has now. Unless load and run may displace, a load
  // that evicted another model would be evict-and-reload on the request
  // path, and the two could take turns; displacing is then the move
  // policy's decision (move_policy.h). When it may, only copies that have
  // been resident for the move policy's minimum residence count as room.
  const uint64_t budget = models.Budget(key.device);
  if (budget > 0) {
    uint64_t held = models.ResidentBytes(key.device);
    if (held + needed > budget && options.load_and_run_displaces) held -= std::min(held, DisplaceableBytes(key.device));
    if (held + needed > budget && StagingOn()) {
      for (const ResidentModel& r : IdleStagedCopies(key.device)) held -= std::min(held, r.bytes);
    }
    if (held + needed > budget) return std::nullopt;
  }
  // The link carries the running load's transfer and the placement
  // controller's moves: the longer of its queue and the lane's running
  // load, then the loads waiting on the lane before it.
  return *load + std::max(LinkQueueUs(key.device), lane.running_left_us) + lane.waiting_us;
}

LoadSource CoreParts::NextLoadSource(const Route& there) const {
  return models.HasHostCopy(there) ? LoadSource::kHostCopy : LoadSource::kFile;
}

uint64_t CoreParts::DisplaceableBytes(const DeviceId& device) const {
  const auto settled =
      std::chrono::steady_clock::now() - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double>(options.placement.min_residence_s));
  uint64_t bytes = 0;
  for (const ResidentModel& r : IdleCopies(device)) {
    if (r.ready_since <= settled) bytes += r.bytes;
  }
  return bytes;
}

std::vector<ResidentModel> CoreParts::IdleCopies(const DeviceId& device) const {
  std::vector<ResidentModel> idle;
  for (ResidentModel& r : models.Resident()) {
    if (r.key.device == device && !r.pinned && r.in_flight == 0) idle.push_back(std::move(r));
  }
  return idle;
}

void CoreParts::CountDemand(const std::string& model, std::chrono::steady_clock::time_point now) {
  demand.Add(model, 1, now);
  if (StagingOn() && options.staging_demand_window.count() > 0) staging_demand.Add(model, 1, now);
}

std::vector<ResidentModel> CoreParts::IdleStagedCopies(const DeviceId& device) const {
  std::vector<ResidentModel> staged = IdleCopies(device);
  std::erase_if(staged, [&](const ResidentModel& r) { return placement.Placed(r.key.model, device); });
  return staged;
}

void CoreParts::MakeStagingRoom(const Route& there) {
  const ModelKey key = there.key();
  if (!StagingOn() || key.device.kind == DeviceKind::kCpu || models.IsResident(key)) return;
  const uint64_t budget = models.Budget(key.device);
  if (budget == 0) return;
  const uint64_t needed = models.ExpectedFootprint(there).total();
  const auto now = std::chrono::steady_clock::now();
  const std::vector<ResidentModel> idle = IdleStagedCopies(key.device);
  std::vector<StagedCopy> staged;
  for (const ResidentModel& r : idle)
    staged.push_back({r.key.model, staging_demand.Rate(r.key.model, now), r.last_used});
  for (size_t i : StagedEvictionOrder(staged)) {
    if (models.ResidentBytes(key.device) + needed <= budget) return;
    // kBudget: the listener notes it as demoted (it answers from the cpu).
    models.EvictIdleCopies([&](const ModelKey& k) { return k == idle[i].key; }, EvictionReason::kBudget);
  }
}

bool CoreParts::LoadsOnArrival(const Route& route) const {
  return options.router.load_on_arrival && route.ready_path != nullptr && route.device.id.kind != DeviceKind::kCpu &&
         std::string_view(route.ready_path) == ReadyPathName(ReadyPath::kLoadAndRun);
}

namespace {

// What a hold made by HoldForLoad keeps: the lease on the copy loaded, and
// whose copy it is (DroppedHeldCopy reads both; no other code makes holds).
struct HeldCopy {
  ModelKey key;
  ModelCache::Lease lease;
};

}  // namespace

bool CoreParts::HoldForLoad(Route route, ArrivalLoads::ThenFn queue) {
  const ModelKey key = route.key();
  if (models.IsResident(key)) return false;
  const double estimate_us = OwnLoadUs(route, models.ExpectedFootprint(route).total()).value_or(0);
  auto load = [this, route = std::move(route)]() -> ArrivalLoads::Hold {
    if (draining.load()) return nullptr;
    MakeStagingRoom(route);
    // The lease goes with the requests held for the load until they are
    // answered (Job::model_hold), so the copy loaded for them is not
    // evicted before they run.
    absl::StatusOr<ModelCache::Lease> lease = models.Acquire(route);
    if (!lease.ok()) {
      LOG_DEBUG << "the load of " << route.key().ToString()
                << " asked for on a request's arrival failed (its worker loads it again): " << lease.status().message();
      return nullptr;
    }
    return std::make_shared<HeldCopy>(HeldCopy{route.key(), *std::move(lease)});
  };
  return arrival_loads.Ask(key.device.ToString(), key.ToString(), std::move(load), std::move(queue), estimate_us);
}

const ModelCache::Lease* CoreParts::DroppedHeldCopy(const ArrivalLoads::Hold& hold, const ModelKey& key) const {
  if (hold == nullptr) return nullptr;
  const auto* held = static_cast<const HeldCopy*>(hold.get());
  if (!(held->key == key) || models.IsResident(key)) return nullptr;
  return &held->lease;
}

std::vector<DeviceId> CoreParts::Accelerators() const {
  std::vector<DeviceId> accelerators;
  for (const DeviceId& id : devices.Available()) {
    if (id.kind != DeviceKind::kCpu) accelerators.push_back(id);
  }
  return accelerators;
}

double CoreParts::SimulatedCpuExtraUs(const ModelKey& key, int64_t rows, uint64_t wall_us, uint64_t cpu_us) {
  if (options.simulated_cpu_slowdown <= 1) return 0;
  const uint64_t work_us = options.intra_op_threads == 1 ? cpu_us : wall_us;
  const uint64_t least = simulated_cpu_work.Lower(absl::StrCat(key.ToString(), "#", key.generation), rows, work_us);
  return infergate::SimulatedCpuExtraUs(static_cast<double>(wall_us), static_cast<double>(least),
                                        options.simulated_cpu_slowdown);
}

double CoreParts::LinkQueueUs(const DeviceId& device) const {
  std::optional<DeviceInfo> info = devices.Find(device);
  return info && info->simulation ? static_cast<double>(SimulatedLinkQueue(*info->simulation).count()) : 0.0;
}

double CoreParts::EstimatedTransferUs(const DeviceId& device, uint64_t bytes) const {
  // The link's queue too: a move weighed now starts after those on it.
  return TransferAloneUs(device, bytes) + LinkQueueUs(device);
}

double CoreParts::TransferAloneUs(const DeviceId& device, uint64_t bytes) const {
  std::optional<DeviceInfo> info = devices.Find(device);
  if (info && info->simulation) return static_cast<double>(SimulatedTransferTime(*info->simulation, bytes).count());
  const bool mps = device.kind == DeviceKind::kMps;
  const double bytes_per_second = mps ? kSimulatedMpsBytesPerSecond : kSimulatedCudaBytesPerSecond;
  const auto fixed = mps ? kSimulatedMpsTransferLatency : kSimulatedCudaTransferLatency;
  return static_cast<double>(fixed.count()) + static_cast<double>(bytes) / bytes_per_second * 1e6;
}

absl::Status CoreParts::KeepOnCpu(const std::string& model) {
  if (draining.load()) return absl::UnavailableError("the server is draining");
  ASSIGN_OR_RETURN(Route route,
                   planner.Plan({model, "", kCpuDevice.ToString(), Precision::kAuto, /*allow_fallback=*/false}));
  if (models.IsResident(route.key())) return absl::OkStatus();
  const uint64_t budget = models.Budget(kCpuDevice);
  const uint64_t expected = models.ExpectedFootprint(route).total();
  // Host copies of weights are held in the CPU's budget too.
  const uint64_t held = models.ResidentBytes(kCpuDevice) + models.host_copies().bytes();
  if (budget > 0 && held + expected > budget) {
    return absl::ResourceExhaustedError(absl::StrCat("the cpu's cache budget (", budget, " bytes, ", held,
                                                     " held) has no room for its ", expected, " bytes"));
  }
  // Loads it and runs its warm-up (a run on the new copy before traffic).
  RETURN_IF_ERROR(models.WarmUp(route));
  LOG_INFO << "model '" << model << "' has a cpu copy to answer from while it is off the accelerators";
  return absl::OkStatus();
}

absl::Status CoreParts::Demote(const std::string& model, const DeviceId& device) {
  const size_t evicted = models.EvictIdleCopies(
      [&](const ModelKey& key) { return key.model == model && key.device == device; }, EvictionReason::kDemoted);
  if (evicted == 0) return absl::FailedPreconditionError(absl::StrCat("its copy on ", device.ToString(), " is in use"));
  LOG_INFO << "model '" << model << "' demoted from " << device.ToString()
           << " to make room: auto sends its requests where it is resident (the cpu when it has a copy there)";
  observer->OnModelMove(model, device, "demoted");
  return absl::OkStatus();
}

absl::Status CoreParts::Promote(const std::string& model, const DeviceId& device) {
  if (draining.load()) return absl::UnavailableError("the server is draining");
  ASSIGN_OR_RETURN(Route route,
                   planner.Plan({model, "", device.ToString(), Precision::kAuto, /*allow_fallback=*/false}));
  if (models.IsResident(route.key())) return absl::OkStatus();  // a request loaded it meanwhile
  const Clock::time_point start = Clock::now();
  // Loads it and runs its warm-up (a run on the new copy before traffic).
  RETURN_IF_ERROR(models.WarmUp(route));
  LOG_INFO << "model '" << model << "' version " << route.version << " moved to " << device.ToString()
           << " in the background in " << MicrosBetween(start, Clock::now()) / 1000
           << " ms: auto sent its requests where it was resident meanwhile, and sends them there now";
  observer->OnModelMove(model, device, "promoted");
  return absl::OkStatus();
}

}  // namespace infergate
