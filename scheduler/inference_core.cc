#include "scheduler/inference_core.h"

#include <algorithm>
#include <cstdlib>

#include "common/logging.h"
#include "scheduler/model_config.h"
#include "scheduler/model_repository.h"
#include "scheduler/scheduler.h"

namespace infergate {

bool ModelStatus::AllowsDevice(const DeviceId& device) const { return DeviceAllowed(config, device); }

InferenceCore::InferenceCore(std::string repository_root, DeviceRegistry devices, SchedulerOptions options,
                             ServableLoader loader)
    : repository_(std::make_unique<ModelRepository>(std::move(repository_root))),
      devices_(std::move(devices)),
      scheduler_(std::make_unique<Scheduler>(*repository_, devices_, std::move(options), std::move(loader))) {}

InferenceCore::~InferenceCore() { scheduler_->Shutdown(); }

absl::Status InferenceCore::Start() {
  DiskRepository scanned;
  if (absl::Status s = repository_->Scan(&scanned); !s.ok()) return s;
  LOG_INFO << "model repository scanned: " << repository_->List().size() << " model(s)";
  scheduler_->Warmup();
  scheduler_->StartPolling(std::move(scanned));
  ready_.store(true);
  return absl::OkStatus();
}

bool InferenceCore::ready() const { return ready_.load(); }

std::shared_ptr<RequestHandle> InferenceCore::Infer(InferenceRequest request, InferCallback done) {
  return scheduler_->Submit(std::move(request), std::move(done));
}

void InferenceCore::LoadModel(const LoadRequest& request, std::function<void(absl::StatusOr<LoadResult>)> done) {
  scheduler_->LoadModel(request, std::move(done));
}

absl::StatusOr<size_t> InferenceCore::UnloadModel(const LoadRequest& request) {
  return scheduler_->UnloadModel(request);
}

void InferenceCore::ForgetModel(const std::string& name) { scheduler_->ForgetModel(name); }

absl::StatusOr<uint64_t> InferenceCore::PredictFootprint(const std::string& name, const std::string& folder) const {
  return scheduler_->PredictFootprint(name, folder);
}

namespace {

// What front ends see of one repository entry, with its resident copies.
ModelStatus StatusOf(ModelEntry entry, const std::vector<ResidentModel>& resident) {
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
  return status;
}

}  // namespace

absl::StatusOr<std::vector<ModelStatus>> InferenceCore::Models() const {
  std::vector<ResidentModel> resident = scheduler_->Resident();
  std::vector<ModelStatus> out;
  for (ModelEntry& entry : repository_->List()) {
    out.push_back(StatusOf(std::move(entry), resident));
    out.back().precision = scheduler_->PrecisionReports(out.back().name);
  }
  return out;
}

bool InferenceCore::KnownModel(absl::string_view name) const { return repository_->Known(name); }

absl::StatusOr<ModelStatus> InferenceCore::Model(absl::string_view name, absl::string_view version) {
  absl::StatusOr<std::shared_ptr<const ModelEntry>> entry = repository_->Find(name);
  if (!entry.ok()) return entry.status();
  if (!version.empty()) {
    if (absl::StatusOr<int64_t> v = repository_->ResolveVersion(**entry, version); !v.ok()) return v.status();
  }
  ModelStatus status = StatusOf(**entry, scheduler_->Resident());
  status.precision = scheduler_->PrecisionReports(status.name);
  return status;
}

absl::StatusOr<std::vector<ModelStats>> InferenceCore::Statistics(absl::string_view model,
                                                                  absl::string_view version) {
  std::vector<std::pair<std::string, int64_t>> wanted;
  if (model.empty()) {
    if (!version.empty()) return absl::InvalidArgumentError("version: needs a model name");
    for (const ModelEntry& entry : repository_->List()) {
      for (int64_t v : entry.versions) wanted.emplace_back(entry.name, v);
    }
  } else {
    absl::StatusOr<std::shared_ptr<const ModelEntry>> entry = repository_->Find(model);
    if (!entry.ok() && !absl::IsFailedPrecondition(entry.status())) return entry.status();
    if (entry.ok()) {
      if (version.empty()) {
        for (int64_t v : (*entry)->versions) wanted.emplace_back((*entry)->name, v);
      } else {
        absl::StatusOr<int64_t> v = repository_->ResolveVersion(**entry, version);
        if (!v.ok()) return v.status();
        wanted.emplace_back((*entry)->name, *v);
      }
    }
  }
  std::vector<ModelStats> recorded = scheduler_->Statistics(std::string(model));
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
  std::vector<ResidentModel> resident = scheduler_->Resident();
  std::vector<DeviceStatus> out;
  for (DeviceInfo& info : devices_.Snapshot()) {
    DeviceStatus status;
    DeviceLoad load = scheduler_->Load(info.id);
    status.queue_depth = load.queue_depth;
    status.oldest_running = load.oldest_running;
    for (const auto& [flow, depth] : load.queue_depth_by_model) {
      status.model_queues.push_back({flow.model, flow.version, depth});
    }
    status.in_flight = load.in_flight;
    status.workers = load.workers;
    status.queue_capacity = load.capacity;
    status.busy_us = load.busy_us;
    status.cache_budget_bytes = scheduler_->CacheBudget(info.id);
    for (const ResidentModel& r : resident) {
      if (r.key.device == info.id) status.resident.push_back(r);
    }
    if (info.id.kind == DeviceKind::kMps) status.unsupported_ops = scheduler_->UnsupportedOps(DeviceKind::kMps);
    status.info = std::move(info);
    out.push_back(std::move(status));
  }
  return out;
}

bool InferenceCore::Drain(std::chrono::steady_clock::time_point deadline) {
  ready_.store(false);
  return scheduler_->Drain(deadline);
}

void InferenceCore::Shutdown() { scheduler_->Shutdown(); }

void InferenceCore::SetObserver(SchedulerObserver* observer) { scheduler_->SetObserver(observer); }

}  // namespace infergate
