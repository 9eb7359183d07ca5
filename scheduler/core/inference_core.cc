#include "scheduler/core/inference_core.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "devices/system_info.h"
#include "scheduler/core/core_parts.h"
#include "scheduler/core/request_dispatcher.h"
#include "scheduler/core/thread_sizing.h"
#include "scheduler/execution/drain_refusal.h"
#include "scheduler/repository/model_config.h"
#include "scheduler/repository/model_name.h"
#include "scheduler/repository/version_policy.h"

namespace infergate {
bool ModelStatus::AllowsDevice(const DeviceId& device) const { return DeviceAllowed(config, device); }

InferenceCore::InferenceCore(std::string repository_root, DeviceRegistry devices, SchedulerOptions options,
                             ServableLoader loader)
    : parts_(std::make_unique<CoreParts>(std::move(repository_root), std::move(devices),
                                         WithThreadsSized(std::move(options), static_cast<int>(LogicalCores())),
                                         std::move(loader))),
      dispatcher_(std::make_unique<RequestDispatcher>(*parts_)) {
  parts_->dispatcher = dispatcher_.get();
  const SchedulerOptions& o = parts_->options;
  LOG_INFO << "scheduler: " << o.cpu_workers << " cpu workers x " << o.intra_op_threads
           << " intra-op threads, queue capacity " << o.queue_capacity << " per device, batching "
           << (o.batching ? "on" : "off") << ", accuracy checks " << (o.precision_checks ? "on" : "off");
  parts_->checker.Start();
  if (o.background_moves) parts_->placement.Start();
}

InferenceCore::~InferenceCore() { Shutdown(); }

absl::Status InferenceCore::Start() {
  // LibTorch's (and the BLAS's) threads are process-wide: set once, here,
  // to what the CPU workers were sized for.
  const std::string blas = ApplyIntraOpThreads(parts_->options.intra_op_threads);
  LOG_INFO << "intra-op threads: " << parts_->options.intra_op_threads
           << (blas.empty() ? "" : absl::StrCat(" (BLAS too, via ", blas, ")"));
  DiskRepository scanned;
  RETURN_IF_ERROR(parts_->repository.Scan(&scanned));
  LOG_INFO << "model repository scanned: " << parts_->repository.List().size() << " model(s)";
  RETURN_IF_ERROR(ServeInitialModelsOnly());
  Warmup();
  const std::chrono::milliseconds poll = parts_->options.repository_poll_interval;
  if (poll.count() > 0 && !parts_->poller) {
    parts_->poller = std::make_unique<RepositoryPoller>(parts_->repository.root(), parts_->lifecycle);
    parts_->poller->Start(poll, std::move(scanned));
    LOG_INFO << "following the model repository: polled every " << poll.count() << " ms";
  }
  ready_.store(true);
  return absl::OkStatus();
}

bool InferenceCore::ready() const { return ready_.load(); }

std::shared_ptr<RequestHandle> InferenceCore::Infer(InferenceRequest request, InferCallback done) {
  return dispatcher_->Submit(std::move(request), std::move(done));
}

void InferenceCore::LoadModel(const LoadRequest& request, std::function<void(absl::StatusOr<LoadResult>)> done) {
  if (parts_->draining.load()) return done(absl::UnavailableError("server is draining; it loads no models"));
  if (absl::Status allowed = CheckExplicitControl(); !allowed.ok()) return done(allowed);
  DeviceExecutor* cpu = parts_->executors.Find(kCpuDevice);
  if (!cpu) return done(absl::UnavailableError("device: no cpu executor"));
  auto shared_done = std::make_shared<std::function<void(absl::StatusOr<LoadResult>)>>(std::move(done));
  // An explicit load first re-reads the model's folder (picking up what
  // changed on disk, loading new files before they answer): disk I/O and
  // perhaps loads, so on a cpu worker rather than the caller's thread.
  absl::Status submitted = cpu->SubmitTask([this, request, shared_done] {
    if (absl::Status synced =
            parts_->lifecycle.SyncModel(request.model, request.config_override, {request.files, request.folder});
        !synced.ok()) {
      return (*shared_done)(synced);
    }
    // A load may take its time: the precision it loads in is checked first.
    CheckPrecisionNow(request.model, request.version, request.device.empty() ? "auto" : request.device,
                      request.precision, "load");
    absl::StatusOr<Route> route = parts_->planner.Plan(
        {request.model, request.version, request.device, request.precision, /*allow_fallback=*/false});
    if (!route.ok()) return (*shared_done)(route.status());
    DeviceExecutor* ex = parts_->executors.Find(route->device.id);
    if (!ex) {
      return (*shared_done)(
          absl::UnavailableError(absl::StrCat("device: ", route->device.id.ToString(), " has no executor")));
    }
    absl::Status queued = ex->SubmitTask([this, r = *std::move(route), shared_done] {
      Clock::time_point start = Clock::now();
      // The lease ends before the answer goes out, so a client that unloads the
      // model right after this reply never finds it still in use.
      if (absl::Status loaded = parts_->models.Acquire(r).status(); !loaded.ok()) return (*shared_done)(loaded);
      LoadResult result;
      result.version = r.version;
      result.device = r.device.id.ToString();
      result.dtype = r.dtype;
      result.load_us = MicrosBetween(start, Clock::now());
      (*shared_done)(result);
    });
    if (!queued.ok()) (*shared_done)(queued);
  });
  if (!submitted.ok()) (*shared_done)(submitted);
}

absl::StatusOr<size_t> InferenceCore::UnloadModel(const LoadRequest& request) {
  RETURN_IF_ERROR(CheckExplicitControl());
  // The whole model (Triton's unload) takes it out of service; a version,
  // device or precision only drops resident copies, which load again on
  // demand.
  if (request.version.empty() && request.device.empty() && request.precision == Precision::kAuto) {
    RETURN_IF_ERROR(ValidateModelName(request.model));
    return parts_->lifecycle.Unload(request.model);
  }
  return parts_->models.Unload(request);
}

absl::StatusOr<uint64_t> InferenceCore::PredictFootprint(const std::string& name, const std::string& folder) const {
  ASSIGN_OR_RETURN(DiskModel disk, ScanModelFolder(folder, name));
  std::shared_ptr<ModelEntry> entry = NewModelEntry(parts_->repository.root(), name);
  entry->dir = folder;
  absl::StatusOr<v1::ModelConfig> config = ReadModelConfig(folder, name, ConfigNaming::kServedAs);
  if (!config.ok()) return config.status();
  entry->SetConfig(*std::move(config));
  // The device a cold start loads it on, in the dtype `auto` serves there.
  std::optional<DeviceInfo> device = RoutePlanner::ColdStartDevice(parts_->devices, entry->config);
  if (!device) return absl::FailedPreconditionError("no available device is allowed for the model");
  std::vector<int64_t> on_disk;
  for (const auto& [v, stamp] : disk.versions) on_disk.push_back(v);
  uint64_t total = 0;
  for (int64_t v : SelectVersions(entry->config.version_policy(), on_disk)) {
    const FileStamp& stamp = disk.versions.at(v);
    const DType dtype = RoutePlanner::ComputeDType(*entry, stamp, device->precision, Precision::kAuto);
    total += parts_->footprints.Expect(name, stamp.ContentKey(), stamp.size, device->id.kind, dtype).total();
  }
  return total;
}

void InferenceCore::CheckPrecisionNow(const std::string& model, const std::string& version, const std::string& device,
                                      Precision precision, const char* occasion) {
  if (!parts_->checker.enabled()) return;
  // The first pick, then (if it failed) the other 16-bit dtype.
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<Route> route = parts_->planner.Plan({model, version, device, precision, /*allow_fallback=*/true});
    if (!route.ok() || !route->precision_check) return;
    parts_->checker.CheckNow(*route, *route->precision_check, occasion);
  }
}

absl::Status InferenceCore::ServeInitialModelsOnly() {
  const SchedulerOptions& o = parts_->options;
  if (o.model_control != SchedulerOptions::ModelControl::kExplicit) return absl::OkStatus();
  if (std::find(o.initial_models.begin(), o.initial_models.end(), "*") != o.initial_models.end()) {
    return absl::OkStatus();
  }
  for (const std::string& name : o.initial_models) {
    if (!KnownModel(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--load-model: failed to load '", name, "': the model repository has no model of that name"));
    }
  }
  int unloaded = 0;
  for (const ModelEntry& entry : parts_->repository.List()) {
    if (std::find(o.initial_models.begin(), o.initial_models.end(), entry.name) != o.initial_models.end()) continue;
    if (parts_->lifecycle.Unload(entry.name).ok()) ++unloaded;
  }
  LOG_INFO << "explicit model control: " << o.initial_models.size() << " model(s) served from the start, " << unloaded
           << " left unloaded until an explicit load";
  return absl::OkStatus();
}

absl::Status InferenceCore::CheckExplicitControl() const {
  const SchedulerOptions::ModelControl mode = parts_->options.model_control;
  if (mode != SchedulerOptions::ModelControl::kNone && mode != SchedulerOptions::ModelControl::kPoll) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat(
      kModelControlRefusal, " (--model-control-mode=", mode == SchedulerOptions::ModelControl::kNone ? "none" : "poll",
      ": the repository decides what is served; start the server with --model-control-mode=explicit to load and "
      "unload models through the API)"));
}

void InferenceCore::Warmup() {
  for (const ModelEntry& entry : parts_->repository.List()) {
    if (!entry.config.warmup() || !entry.problem.ok() || entry.unloaded) continue;
    // Accuracy first, on every device the model may run on, so warm-up
    // loads the dtype that will serve.
    for (const DeviceId& id : parts_->devices.Available()) {
      if (DeviceAllowed(entry.config, id))
        CheckPrecisionNow(entry.name, "", id.ToString(), Precision::kAuto, "warm-up");
    }
    absl::StatusOr<Route> route = parts_->planner.Plan({entry.name, "", "auto", Precision::kAuto, true});
    if (!route.ok()) {
      LOG_WARNING << "warm-up of model '" << entry.name << "' skipped: " << route.status().message();
      continue;
    }
    if (absl::Status s = parts_->models.WarmUp(*route); !s.ok()) {
      // The config's own warm-up samples (Triton's model_warmup) are part
      // of loading: a version they fail on does not serve. A run on zeros
      // is infergate's courtesy: its failure is only logged.
      if (entry.config.warmup_samples_size() > 0) {
        parts_->lifecycle.FailVersion(entry.name, route->version,
                                      absl::Status(s.code(), absl::StrCat("failed to load: ", s.message())));
      } else {
        LOG_WARNING << "warm-up of model '" << entry.name << "' failed: " << s.message();
      }
    }
  }
}

void InferenceCore::ForgetModel(const std::string& name) { parts_->lifecycle.Forget(name); }

namespace {

// What front ends see of one repository entry, with its resident copies.
ModelStatus StatusOf(ModelEntry entry, const std::vector<ResidentModel>& resident,
                     const PlacementController& placement) {
  ModelStatus status;
  status.name = std::move(entry.name);
  status.config = std::move(entry.config);
  status.versions = std::move(entry.versions);
  status.states = std::move(entry.states);
  status.problem = std::move(entry.problem);
  status.config_problem = std::move(entry.config_problem);
  for (const ResidentModel& r : resident) {
    if (r.key.model == status.name) status.loaded.push_back(r.key);
  }
  PlacementController::ModelPlacement where = placement.PlacementOf(status.name);
  status.moving = std::move(where.moving);
  status.demoted = std::move(where.demoted);
  return status;
}

}  // namespace

absl::StatusOr<std::vector<ModelStatus>> InferenceCore::Models() const {
  std::vector<ResidentModel> resident = parts_->models.Resident();
  std::vector<ModelStatus> out;
  for (ModelEntry& entry : parts_->repository.List()) {
    out.push_back(StatusOf(std::move(entry), resident, parts_->placement));
    out.back().precision = parts_->checker.Reports(out.back().name);
  }
  return out;
}

bool InferenceCore::KnownModel(absl::string_view name) const { return parts_->repository.Known(name); }

absl::StatusOr<ModelStatus> InferenceCore::Model(absl::string_view name, absl::string_view version) {
  ASSIGN_OR_RETURN(std::shared_ptr<const ModelEntry> entry, parts_->repository.Find(name));
  if (!version.empty()) {
    if (absl::StatusOr<int64_t> v = parts_->repository.ResolveVersion(*entry, version); !v.ok()) return v.status();
  }
  ModelStatus status = StatusOf(*entry, parts_->models.Resident(), parts_->placement);
  status.precision = parts_->checker.Reports(status.name);
  return status;
}

absl::StatusOr<std::vector<ModelStats>> InferenceCore::Statistics(absl::string_view model, absl::string_view version) {
  std::vector<std::pair<std::string, int64_t>> wanted;
  if (model.empty()) {
    if (!version.empty()) return absl::InvalidArgumentError("version: needs a model name");
    for (const ModelEntry& entry : parts_->repository.List()) {
      for (int64_t v : entry.versions) wanted.emplace_back(entry.name, v);
    }
  } else {
    absl::StatusOr<std::shared_ptr<const ModelEntry>> entry = parts_->repository.Find(model);
    if (!entry.ok() && !absl::IsFailedPrecondition(entry.status())) return entry.status();
    if (entry.ok()) {
      if (version.empty()) {
        for (int64_t v : (*entry)->versions) wanted.emplace_back((*entry)->name, v);
      } else {
        ASSIGN_OR_RETURN(int64_t v, parts_->repository.ResolveVersion(**entry, version));
        wanted.emplace_back((*entry)->name, v);
      }
    }
  }
  std::vector<ModelStats> recorded = parts_->statistics.Snapshot(std::string(model));
  std::vector<ModelStats> out;
  for (const auto& [name, v] : wanted) {
    auto it = std::find_if(recorded.begin(), recorded.end(),
                           [&](const ModelStats& s) { return s.model == name && s.version == v; });
    if (it != recorded.end()) {
      out.push_back(*it);
    } else {
      ModelStats zero;
      zero.model = name;
      zero.version = v;
      out.push_back(std::move(zero));
    }
  }
  return out;
}

std::vector<DeviceStatus> InferenceCore::Devices() const {
  std::vector<ResidentModel> resident = parts_->models.Resident();
  std::vector<DeviceStatus> out;
  for (DeviceInfo& info : parts_->devices.Snapshot()) {
    DeviceStatus status;
    if (DeviceExecutor* ex = parts_->executors.Find(info.id)) {
      // One reading of the queue, so a model's depth never exceeds the total.
      DeviceExecutor::QueueDepths depths = ex->QueueDepthsNow();
      status.queue_depth = depths.total;
      status.held_for_load = parts_->arrival_loads.Held(info.id.ToString());
      status.reserved_for_load = ex->reservations();
      status.oldest_running = ex->OldestRunningAge();
      for (const auto& [flow, depth] : depths.by_model) {
        status.model_queues.push_back({flow.model, flow.version, depth});
      }
      status.in_flight = ex->in_flight();
      status.workers = ex->workers();
      status.queue_capacity = ex->capacity();
      status.busy_us = ex->busy_us();
    }
    status.cache_budget_bytes = parts_->models.Budget(info.id);
    if (info.id == kCpuDevice) {
      const HostCopyStore& host = parts_->models.host_copies();
      status.host_copies = host.count();
      status.host_copy_bytes = host.bytes();
      status.loads_from_host_copy = host.hits();
    }
    for (const ResidentModel& r : resident) {
      if (r.key.device == info.id) status.resident.push_back(r);
    }
    if (info.id.kind == DeviceKind::kMps) status.unsupported_ops = parts_->learned.ForKind(DeviceKind::kMps);
    status.info = std::move(info);
    out.push_back(std::move(status));
  }
  return out;
}

bool InferenceCore::Drain(std::chrono::steady_clock::time_point deadline) {
  ready_.store(false);
  parts_->draining.store(true);
  parts_->placement.Stop();                    // no moves while draining
  parts_->arrival_loads.Stop();                // requests held for a load are queued; workers load
  if (parts_->poller) parts_->poller->Stop();  // no loads while draining
  parts_->checker.Stop();
  if (parts_->executors.WaitIdle(deadline)) return true;
  // Out of time: what is still queued is answered now, not run, so
  // --drain-timeout bounds the stop whether or not its callers are there
  // to cancel (a REST client is not) and they hear why while the ports are
  // still open. Batches running finish.
  const absl::Status stopping =
      DrainRefusal("server is stopping: its drain timeout passed with this request still queued; it was not run");
  if (size_t refused = parts_->executors.RefuseQueued(stopping); refused > 0) {
    LOG_WARNING << "drain timeout: " << refused << " queued request(s) answered UNAVAILABLE without running";
  }
  return false;
}

void InferenceCore::Shutdown() {
  parts_->placement.Stop();
  parts_->arrival_loads.Stop();
  if (parts_->poller) parts_->poller->Stop();
  parts_->checker.Stop();
  parts_->executors.Stop();
}

void InferenceCore::SetObserver(SchedulerObserver* observer) {
  parts_->observer = observer ? observer : &parts_->ignore;
  parts_->models.SetObserver(observer);
  parts_->lifecycle.SetObserver(observer);
  parts_->checker.SetObserver(observer);
}

}  // namespace infergate
