#include "scheduler/scheduler.h"

#include <ATen/Parallel.h>
#include <ATen/ops/zeros.h>

#include <time.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "devices/device_failure.h"
#include "devices/logging.h"
#include "devices/system_info.h"
#include "devices/torch_dtype.h"
#include "scheduler/batch_tensors.h"
#include "scheduler/loaded_model.h"
#include "scheduler/model_config.h"

namespace infergate {
namespace {

bool KindAllowed(const v1::ModelConfig& config, DeviceKind kind) {
  if (config.allowed_devices_size() == 0) return true;
  for (int k : config.allowed_devices()) {
    if ((k == v1::CPU && kind == DeviceKind::kCpu) || (k == v1::CUDA && kind == DeviceKind::kCuda) ||
        (k == v1::MPS && kind == DeviceKind::kMps)) {
      return true;
    }
  }
  return false;
}

// The compute dtype of `model` on a device with `traits` for a request
// asking for `precision`.
DType ComputeDType(const ModelEntry& model, const PrecisionTraits& traits, Precision precision) {
  bool float64_model = false;
  for (const InputSpec& in : model.declared.inputs) float64_model |= in.dtype == DType::kFloat64;
  Precision model_override = PrecisionFromProto(model.config.precision()).value_or(Precision::kAuto);
  return ResolveComputeDType(traits, precision, model_override, float64_model);
}

std::vector<TensorMeta> Metas(const std::vector<NamedTensor>& inputs) {
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (const NamedTensor& t : inputs) {
    metas.push_back({t.name, FromScalarType(t.tensor.scalar_type()).value_or(DType::kFloat32),
                     {t.tensor.sizes().data(), t.tensor.sizes().size()}});
  }
  return metas;
}

ModelKey KeyOf(const Route& route) {
  return {route.model->name, route.version, route.resolution.device, route.dtype};
}

// Requests that may share a batch have equal keys: same model, version,
// device and dtype, and the same input names, dtypes and non-batch dims.
std::string BatchKey(const Route& route, const std::vector<NamedTensor>& inputs) {
  std::string key = KeyOf(route).ToString();
  for (const NamedTensor& t : inputs) {
    absl::StrAppend(&key, "|", t.name, ":", static_cast<int>(t.tensor.scalar_type()));
    for (int64_t d = 1; d < t.tensor.dim(); ++d) absl::StrAppend(&key, ",", t.tensor.size(d));
  }
  return key;
}

uint64_t ThreadCpuMicros() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

}  // namespace

Scheduler::Scheduler(ModelRepository& repository, DeviceRegistry& devices, SchedulerOptions options)
    : repository_(repository), devices_(devices), options_(std::move(options)), unsupported_(options_.state_file) {
  int cores = static_cast<int>(LogicalCores());
  if (options_.cpu_workers <= 0) options_.cpu_workers = std::clamp(cores, 1, 4);
  if (options_.intra_op_threads <= 0) options_.intra_op_threads = std::max(1, cores / options_.cpu_workers);
  // Process-wide in LibTorch; each worker thread picks it up on first use.
  at::set_num_threads(options_.intra_op_threads);
  // The BLAS has a thread pool of its own, sized to every core by default.
  std::string blas = SetBlasThreads(options_.intra_op_threads);
  cache_.SetEvictionListener([this](const ModelKey& key, uint64_t, const char* why) {
    observer_->OnEviction(key.device, why);
  });
  if (absl::Status s = unsupported_.Load(); !s.ok()) {
    LOG_WARNING << s.message() << "; starting with no learned device limits";
  }
  for (const DeviceInfo& d : devices_.Snapshot()) {
    if (!d.available) continue;
    int workers = d.id.kind == DeviceKind::kCpu ? options_.cpu_workers : options_.accelerator_workers;
    executors_[d.id] = std::make_unique<DeviceExecutor>(d.id, workers, options_.queue_capacity,
                                                        [this](DeviceExecutor::Batch& batch) { RunBatch(batch); });
    executors_[d.id]->set_spin_us(options_.worker_spin_us);
    auto budget = options_.cache_budgets.find(d.id);
    uint64_t bytes = budget != options_.cache_budgets.end()
                         ? budget->second
                         : static_cast<uint64_t>(static_cast<double>(d.memory_total_bytes) * options_.cache_budget_fraction);
    cache_.SetBudget(d.id, bytes);
    LOG_INFO << "device " << d.id.ToString() << ": " << workers << " worker(s), model cache budget " << bytes
             << " bytes";
  }
  LOG_INFO << "scheduler: " << options_.cpu_workers << " cpu workers x " << options_.intra_op_threads
           << " intra-op threads" << (blas.empty() ? "" : absl::StrCat(" (BLAS too, via ", blas, ")"))
           << ", queue capacity " << options_.queue_capacity << " per device, batching "
           << (options_.batching ? "on" : "off");
}

Scheduler::~Scheduler() { Shutdown(); }

void Scheduler::Shutdown() {
  for (auto& [id, executor] : executors_) executor->Stop();
}

bool Scheduler::Drain(Clock::time_point deadline) {
  for (auto& [id, executor] : executors_) executor->StopAccepting();
  bool idle = true;
  // CPU last: device failures may still move work onto it while others drain.
  for (auto& [id, executor] : executors_) {
    if (id.kind != DeviceKind::kCpu) idle = executor->WaitIdle(deadline) && idle;
  }
  for (auto& [id, executor] : executors_) {
    if (id.kind == DeviceKind::kCpu) idle = executor->WaitIdle(deadline) && idle;
  }
  return idle;
}

DeviceExecutor* Scheduler::Executor(const DeviceId& device) const {
  auto it = executors_.find(device);
  return it == executors_.end() ? nullptr : it->second.get();
}

DeviceLoad Scheduler::Load(const DeviceId& device) const {
  DeviceExecutor* ex = Executor(device);
  if (!ex) return {};
  return {ex->queue_depth(), ex->in_flight(), ex->busy_us(), ex->workers(), ex->capacity()};
}

absl::Status Scheduler::PlaceOn(Route& route, const DeviceId& device, Precision precision) {
  std::optional<DeviceInfo> info = devices_.Find(device);
  if (!info) return absl::UnavailableError(absl::StrCat("device: ", device.ToString(), " is not known"));
  route.device = *std::move(info);
  route.resolution.device = device;
  route.dtype = ComputeDType(*route.model, route.device.precision, precision);
  return absl::OkStatus();
}

DeviceId Scheduler::ChooseAuto(const ModelEntry& model, int64_t version, Precision precision,
                               const std::vector<DeviceId>& allowed) {
  std::vector<RouteCandidate> candidates;
  candidates.reserve(allowed.size());
  for (const DeviceId& id : allowed) {
    RouteCandidate c;
    c.device = id;
    if (DeviceExecutor* ex = Executor(id)) {
      c.queued = ex->queue_depth();
      c.running = ex->in_flight();
      c.workers = ex->workers();
    }
    std::optional<DeviceInfo> info = devices_.Find(id);
    DType dtype = ComputeDType(model, info ? info->precision : PrecisionTraits{}, precision);
    c.resident = cache_.IsResident({model.name, version, id, dtype});
    c.latency_us = latency_.Mean(model.name, id);
    candidates.push_back(c);
  }
  int best = ChooseDevice(candidates, options_.router);
  return candidates[best].device;
}

absl::StatusOr<Route> Scheduler::Plan(absl::string_view model, absl::string_view version, absl::string_view device,
                                      Precision precision, bool allow_fallback) {
  Route route;
  absl::StatusOr<std::shared_ptr<const ModelEntry>> entry = repository_.Find(model);
  if (!entry.ok()) return entry.status();
  route.model = *std::move(entry);
  absl::StatusOr<int64_t> v = repository_.ResolveVersion(*route.model, version);
  if (!v.ok()) return v.status();
  route.version = *v;

  absl::StatusOr<DeviceRequest> wanted = ParseDeviceRequest(device);
  if (!wanted.ok()) return wanted.status();
  const v1::ModelConfig& config = route.model->config;
  const std::string& name = route.model->name;
  if (wanted->automatic) {
    std::vector<DeviceId> allowed;
    for (const DeviceId& id : devices_.Available()) {
      if (KindAllowed(config, id.kind) && !unsupported_.Lookup(name, id.kind)) allowed.push_back(id);
    }
    if (allowed.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("device: no available device is allowed for model '", name, "'"));
    }
    if (absl::Status s = PlaceOn(route, ChooseAuto(*route.model, route.version, precision, allowed), precision);
        !s.ok()) {
      return s;
    }
    return route;
  }

  absl::StatusOr<DeviceResolution> res = devices_.Resolve(*wanted, allow_fallback);
  if (!res.ok()) return res.status();
  route.resolution = *std::move(res);
  DeviceId target = route.resolution.device;
  std::string id = target.ToString();
  if (!KindAllowed(config, target.kind)) {
    if (!allow_fallback || !KindAllowed(config, DeviceKind::kCpu)) {
      return absl::FailedPreconditionError(absl::StrCat("device: model '", name, "' may not run on ", id));
    }
    target = {DeviceKind::kCpu, 0};
    route.resolution.fell_back = true;
    route.resolution.fallback_reason = absl::StrCat("device_not_allowed:", id);
  } else if (std::optional<std::string> learned = unsupported_.Lookup(name, target.kind)) {
    // Known not to run there: go straight to the CPU instead of failing first.
    if (!allow_fallback) {
      return absl::FailedPreconditionError(absl::StrCat("device: model '", name, "' cannot run on ", id, " (",
                                                        *learned, ") and fallback is DENY"));
    }
    target = {DeviceKind::kCpu, 0};
    route.resolution.fell_back = true;
    route.resolution.fallback_reason = *learned;
    counters_.learned_redirects++;
  }
  if (route.resolution.fell_back) {
    const std::string& reason = route.resolution.fallback_reason;
    // An absent device is labelled by kind: clients choose the index.
    std::string from = absl::StartsWith(reason, "device_unavailable") ? std::string(DeviceKindName(wanted->kind))
                                                                      : wanted->ToString();
    observer_->OnFallback(from, target.ToString(), reason.substr(0, reason.find(':')));
  }
  bool fell_back = route.resolution.fell_back;
  std::string reason = route.resolution.fallback_reason;
  if (absl::Status s = PlaceOn(route, target, precision); !s.ok()) return s;
  route.resolution.fell_back = fell_back;
  route.resolution.fallback_reason = reason;
  return route;
}

absl::StatusOr<ModelCache::Lease> Scheduler::GetModel(const Route& route) {
  ModelKey key = KeyOf(route);
  std::string path = repository_.ModelFile(*route.model, route.version);
  absl::StatusOr<ModelCache::Lease> lease = cache_.Acquire(
      key,
      [&]() -> absl::StatusOr<std::shared_ptr<LoadedModel>> {
        Clock::time_point start = Clock::now();
        auto model = LoadedModel::Load(path, route.model->config, route.device, route.dtype);
        observer_->OnModelLoad(key.model, key.device, MicrosBetween(start, Clock::now()) / 1e6, model.ok());
        if (model.ok()) {
          LOG_INFO << "loaded " << key.ToString() << " from " << path << " in "
                   << MicrosBetween(start, Clock::now()) / 1000 << " ms (" << (*model)->parameter_bytes()
                   << " parameter bytes)";
        }
        return model;
      },
      route.model->config.pinned());
  observer_->OnCacheLookup(key.device, lease.ok() && !lease->loaded_now());
  return lease;
}

std::shared_ptr<Job> Scheduler::Infer(InferenceRequest request, InferCallback done) {
  auto job = std::make_shared<Job>();
  job->set_done(std::move(done));
  absl::StatusOr<Route> route =
      Plan(request.model, request.version, request.device, request.precision, request.allow_fallback);
  if (!route.ok()) {
    job->Finish(route.status());
    return job;
  }
  const ModelEntry& model = *route->model;
  // Check against what config.pbtxt declares before taking a queue slot.
  std::vector<TensorMeta> metas = Metas(request.inputs);
  if (!model.declared.inputs.empty()) {
    absl::StatusOr<std::vector<size_t>> order = MatchInputs(model.declared, metas, model.name);
    if (!order.ok()) {
      job->Finish(order.status());
      return job;
    }
  } else if (request.inputs.empty()) {
    job->Finish(absl::InvalidArgumentError(absl::StrCat("inputs: request has no inputs for model '", model.name, "'")));
    return job;
  }
  uint32_t max_batch = model.config.max_batch_size();
  if (options_.batching && max_batch > 1) {
    bool batchable = true;
    for (const NamedTensor& t : request.inputs) {
      batchable = batchable && t.tensor.dim() >= 1 && t.tensor.size(0) == request.inputs[0].tensor.size(0);
    }
    if (batchable) {
      job->batch_key = BatchKey(*route, request.inputs);
      job->rows = request.inputs[0].tensor.size(0);
      job->max_batch_rows = max_batch;
      job->max_queue_delay_us = model.config.dynamic_batching().max_queue_delay_us();
      const auto& preferred = model.config.dynamic_batching().preferred_batch_sizes();
      job->preferred_batch_rows.assign(preferred.begin(), preferred.end());
    }
  }
  job->rows = std::max<int64_t>(job->rows, BatchRows(model.declared, metas));
  job->route = *std::move(route);
  job->routed = true;
  job->request = std::move(request);
  job->enqueued = Clock::now();
  DeviceExecutor* ex = Executor(job->route.resolution.device);
  if (!ex) {
    job->Finish(absl::UnavailableError(
        absl::StrCat("device: ", job->route.resolution.device.ToString(), " has no executor")));
    return job;
  }
  if (absl::Status s = ex->Submit(job); !s.ok()) {
    if (absl::IsResourceExhausted(s)) observer_->OnRejected(job->route.resolution.device, "queue_full");
    job->Finish(s);
  }
  return job;
}

void Scheduler::Cancel(const std::shared_ptr<Job>& job) {
  if (!job || job->finished()) return;
  job->cancelled.store(true);
  if (DeviceExecutor* ex = job->executor) {
    for (size_t n = ex->PurgeCancelled(); n > 0; --n) observer_->OnRejected(ex->device(), "cancelled");
  }
}

void Scheduler::RunBatch(DeviceExecutor::Batch& batch) {
  Clock::time_point now = Clock::now();
  DeviceExecutor::Batch live;
  live.reserve(batch.size());
  for (auto& job : batch) {
    if (job->cancelled.load()) {
      observer_->OnRejected(job->route.resolution.device, "cancelled");
      job->Finish(absl::CancelledError("request cancelled by the client while queued"));
    } else if (now > job->request.deadline) {
      observer_->OnRejected(job->route.resolution.device, "deadline");
      job->Finish(absl::DeadlineExceededError(
          absl::StrCat("model '", job->route.model->name, "': deadline passed after ",
                       MicrosBetween(job->enqueued, now), " us waiting in the queue of ",
                       job->route.resolution.device.ToString(), "; the request was not run")));
    } else {
      live.push_back(job);
    }
  }
  if (!live.empty()) RunOnDevice(live, /*oom_retried=*/false);
}

void Scheduler::RunOnDevice(DeviceExecutor::Batch& jobs, bool oom_retried) {
  const Route& route = jobs[0]->route;
  const DeviceId device = route.resolution.device;
  const std::string& name = route.model->name;
  Clock::time_point started = Clock::now();

  absl::StatusOr<ModelCache::Lease> lease = GetModel(route);
  if (!lease.ok()) {
    std::optional<DeviceFailureInfo> failure = DeviceFailureOf(lease.status());
    if (failure && failure->kind == DeviceFailure::kOutOfMemory && device.kind != DeviceKind::kCpu) {
      if (!oom_retried) {
        counters_.oom_retries++;
        LOG_WARNING << "out of memory while loading " << KeyOf(route).ToString() << "; evicting idle models";
        cache_.EvictIdle(device, nullptr, "oom");
        return RunOnDevice(jobs, true);
      }
      return FallBack(jobs, lease.status(), "oom");
    }
    for (auto& job : jobs) job->Finish(lease.status());
    return;
  }
  const LoadedModel& model = **lease;

  DeviceExecutor::Batch ready;
  std::vector<std::vector<at::Tensor>> parts;
  std::vector<int64_t> rows;
  for (auto& job : jobs) {
    std::vector<TensorMeta> metas = Metas(job->request.inputs);
    absl::StatusOr<std::vector<size_t>> order = MatchInputs(model.signature(), metas, name);
    if (!order.ok()) {
      job->Finish(order.status());
      continue;
    }
    std::vector<at::Tensor> ordered;
    ordered.reserve(order->size());
    for (size_t i : *order) ordered.push_back(job->request.inputs[i].tensor);
    parts.push_back(std::move(ordered));
    rows.push_back(jobs.size() == 1 ? BatchRows(model.signature(), metas) : job->rows);
    ready.push_back(job);
  }
  if (ready.empty()) return;

  // On a CPU worker with one intra-op thread, the thread's CPU time is the
  // batch's cost without the time other threads took the core away; that is
  // what batch sizing learns from (compute_us, reported, stays wall time).
  const bool own_cpu = device.kind == DeviceKind::kCpu && options_.intra_op_threads == 1;
  Clock::time_point compute_start = Clock::now();
  uint64_t cpu_start = own_cpu ? ThreadCpuMicros() : 0;
  absl::StatusOr<std::vector<NamedTensor>> outputs = model.Run(ConcatBatch(parts));
  uint64_t cpu_us = own_cpu ? ThreadCpuMicros() - cpu_start : 0;
  Clock::time_point compute_end = Clock::now();
  parts.clear();
  if (!outputs.ok()) {
    std::optional<DeviceFailureInfo> failure = DeviceFailureOf(outputs.status());
    if (failure && device.kind != DeviceKind::kCpu) {
      if (failure->kind == DeviceFailure::kUnsupportedOp || failure->kind == DeviceFailure::kDtype) {
        std::string reason = failure->kind == DeviceFailure::kUnsupportedOp
                                 ? absl::StrCat("unsupported_op:", failure->detail)
                                 : absl::StrCat("dtype:", failure->detail);
        if (unsupported_.Record(name, device.kind, reason)) {
          LOG_WARNING << "model '" << name << "' cannot run on " << DeviceKindName(device.kind) << " (" << reason
                      << "); its requests go to the cpu from now on";
        }
        return FallBack(ready, outputs.status(), reason);
      }
      if (failure->kind == DeviceFailure::kDeviceError) {
        devices_.MarkUnhealthy(device, Clock::now() + options_.device_failure_cooldown);
        LOG_WARNING << "device " << device.ToString() << " failed (" << outputs.status().message()
                    << "); out of service for " << options_.device_failure_cooldown.count() << " ms";
        return FallBack(ready, outputs.status(), absl::StrCat("device_error:", device.ToString()));
      }
      if (failure->kind == DeviceFailure::kOutOfMemory) {
        if (!oom_retried) {
          counters_.oom_retries++;
          ModelKey keep = KeyOf(route);
          LOG_WARNING << "out of memory while running " << keep.ToString() << "; evicting idle models";
          cache_.EvictIdle(device, &keep, "oom");
          return RunOnDevice(ready, true);
        }
        return FallBack(ready, outputs.status(), "oom");
      }
    }
    for (auto& job : ready) job->Finish(outputs.status());
    return;
  }

  absl::StatusOr<std::vector<std::vector<NamedTensor>>> split = SplitBatch(*outputs, rows);
  if (!split.ok()) {
    for (auto& job : ready) job->Finish(split.status());
    return;
  }
  uint64_t compute_us = MicrosBetween(compute_start, compute_end);
  latency_.Observe(name, device, static_cast<double>(compute_us) / static_cast<double>(ready.size()));
  int64_t total_rows = 0;
  for (int64_t r : rows) total_rows += r;
  if (!ready[0]->batch_key.empty() && ready.size() == jobs.size()) {
    if (DeviceExecutor* ex = Executor(device)) {
      ex->RecordBatchCost(ready[0]->batch_key, total_rows, own_cpu ? cpu_us : compute_us);
    }
  }
  for (size_t j = 0; j < ready.size(); ++j) {
    Job& job = *ready[j];
    InferenceResult result;
    result.outputs = std::move((*split)[j]);
    result.placement.device = device.ToString();
    result.placement.requested_device = job.request.device;
    result.placement.dtype = model.compute_dtype();
    result.placement.fell_back = job.route.resolution.fell_back;
    result.placement.fallback_reason = job.route.resolution.fallback_reason;
    result.placement.batch_size = static_cast<uint32_t>(total_rows);
    result.placement.model_version = job.route.version;
    result.timing.queue_us = MicrosBetween(job.enqueued, started);
    result.timing.compute_us = compute_us;
    result.timing.total_us = MicrosBetween(job.request.received, compute_end);
    job.Finish(std::move(result));
  }
}

void Scheduler::FallBack(DeviceExecutor::Batch& jobs, const absl::Status& failure, const std::string& reason) {
  const DeviceId cpu{DeviceKind::kCpu, 0};
  DeviceExecutor* ex = Executor(cpu);
  for (auto& job : jobs) {
    const std::string from = job->route.resolution.device.ToString();
    if (!job->request.allow_fallback || !ex) {
      if (absl::IsResourceExhausted(failure) || absl::IsUnavailable(failure)) {
        job->Finish(failure);
      } else {
        job->Finish(absl::FailedPreconditionError(absl::StrCat("device: model '", job->route.model->name,
                                                               "' cannot run on ", from, " (", reason,
                                                               ") and fallback is DENY: ", failure.message())));
      }
      continue;
    }
    Route route = job->route;
    if (absl::Status s = PlaceOn(route, cpu, job->request.precision); !s.ok()) {
      job->Finish(s);
      continue;
    }
    route.resolution.fell_back = true;
    route.resolution.fallback_reason = reason;
    job->route = std::move(route);
    job->batch_key.clear();
    counters_.device_retries++;
    observer_->OnFallback(from, "cpu", reason.substr(0, reason.find(':')));
    static LogRateLimiter limiter(5);
    if (uint64_t held = 0; limiter.Allow(&held)) {
      LOG_INFO << "retrying model '" << job->route.model->name << "' on cpu after " << from << " failed ("
               << reason << ")" << (held ? absl::StrCat(" (", held, " similar lines suppressed)") : "");
    }
    if (absl::Status s = ex->Submit(job); !s.ok()) job->Finish(s);
  }
}

void Scheduler::LoadModel(const LoadRequest& request, std::function<void(absl::StatusOr<LoadResult>)> done) {
  absl::StatusOr<Route> route = Plan(request.model, request.version, request.device, request.precision,
                                     /*allow_fallback=*/false);
  if (!route.ok()) return done(route.status());
  DeviceExecutor* ex = Executor(route->resolution.device);
  if (!ex) {
    return done(absl::UnavailableError(
        absl::StrCat("device: ", route->resolution.device.ToString(), " has no executor")));
  }
  auto shared_done = std::make_shared<std::function<void(absl::StatusOr<LoadResult>)>>(std::move(done));
  absl::Status submitted = ex->SubmitTask([this, r = *std::move(route), shared_done] {
    Clock::time_point start = Clock::now();
    // The lease ends before the answer goes out, so a client that unloads the
    // model right after this reply never finds it still in use.
    if (absl::Status loaded = GetModel(r).status(); !loaded.ok()) return (*shared_done)(loaded);
    LoadResult result;
    result.version = r.version;
    result.device = r.resolution.device.ToString();
    result.dtype = r.dtype;
    result.load_us = MicrosBetween(start, Clock::now());
    (*shared_done)(result);
  });
  if (!submitted.ok()) (*shared_done)(submitted);
}

absl::StatusOr<size_t> Scheduler::UnloadModel(const LoadRequest& request) {
  absl::StatusOr<std::shared_ptr<const ModelEntry>> entry = repository_.Find(request.model);
  // A model whose files are gone or broken may still be resident.
  if (!entry.ok() && !absl::IsFailedPrecondition(entry.status()) && !absl::IsNotFound(entry.status())) {
    return entry.status();
  }
  std::optional<int64_t> version;
  if (!request.version.empty()) {
    absl::StatusOr<int64_t> v = ParseVersion(request.version, "version");
    if (!v.ok()) return v.status();
    version = *v;
  }
  std::optional<DeviceRequest> device;
  if (!request.device.empty()) {
    absl::StatusOr<DeviceRequest> d = ParseDeviceRequest(request.device);
    if (!d.ok()) return d.status();
    if (!d->automatic) device = *d;
  }
  std::optional<DType> dtype;
  switch (request.precision) {
    case Precision::kFp32: dtype = DType::kFloat32; break;
    case Precision::kFp16: dtype = DType::kFloat16; break;
    case Precision::kBf16: dtype = DType::kBFloat16; break;
    case Precision::kAuto: break;
  }
  size_t n = cache_.Unload([&](const ModelKey& key) {
    if (key.model != request.model) return false;
    if (version && key.version != *version) return false;
    if (device && (key.device.kind != device->kind || (!device->any_index && key.device.index != device->index))) {
      return false;
    }
    return !dtype || key.dtype == *dtype;
  });
  if (n == 0 && !entry.ok()) return entry.status();
  return n;
}

void Scheduler::Warmup() {
  for (const ModelEntry& entry : repository_.List()) {
    if (!entry.config.warmup() || !entry.problem.ok()) continue;
    absl::StatusOr<Route> route = Plan(entry.name, "", "auto", Precision::kAuto, true);
    if (!route.ok()) {
      LOG_WARNING << "warm-up of model '" << entry.name << "' skipped: " << route.status().message();
      continue;
    }
    absl::StatusOr<ModelCache::Lease> model = GetModel(*route);
    if (!model.ok()) continue;  // the cache has logged why
    const InputSignature& sig = (*model)->signature();
    std::vector<at::Tensor> zeros;
    bool shapes_known = true;
    for (const InputSpec& spec : sig.inputs) {
      if (!spec.dims || !spec.dtype) {
        shapes_known = false;
        break;
      }
      std::vector<int64_t> shape;
      if (sig.max_batch_size > 0) shape.push_back(1);
      for (int64_t d : *spec.dims) shape.push_back(d == -1 ? 1 : d);
      zeros.push_back(at::zeros(shape, at::TensorOptions().dtype(ToScalarType(*spec.dtype))));
    }
    if (!shapes_known) {
      LOG_INFO << "warm-up of model '" << entry.name << "': loaded; inputs undeclared, so not run";
      continue;
    }
    Clock::time_point start = Clock::now();
    absl::StatusOr<std::vector<NamedTensor>> out = (*model)->Run(zeros);
    if (out.ok()) {
      LOG_INFO << "warm-up of model '" << entry.name << "' on " << route->resolution.device.ToString() << " took "
               << MicrosBetween(start, Clock::now()) << " us";
    } else {
      LOG_WARNING << "warm-up run of model '" << entry.name << "' failed: " << out.status().message();
    }
  }
}

}  // namespace infergate
