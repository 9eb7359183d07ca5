#include "scheduler/scheduler.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "devices/device_failure.h"
#include "devices/system_info.h"
#include "devices/torch_probe.h"
#include "devices/torch_dtype.h"
#include "devices/worker_stream.h"
#include "scheduler/batch_execution.h"
#include "scheduler/drain_refusal.h"
#include "scheduler/failure_policy.h"
#include "scheduler/input_signature.h"
#include "scheduler/job.h"
#include "scheduler/model_config.h"
#include "scheduler/model_name.h"
#include "scheduler/request_trace.h"
#include "scheduler/version_policy.h"

namespace infergate {
namespace {

constexpr DeviceId kCpu{DeviceKind::kCpu, 0};

// Requests that may share a batch have equal keys: same model, version,
// device and dtype, and the same input names, dtypes and non-batch dims.
std::string BatchKey(const Route& route, const std::vector<NamedTensor>& inputs) {
  std::string key = route.key().ToString();
  for (const NamedTensor& t : inputs) {
    absl::StrAppend(&key, "|", t.name, ":", static_cast<int>(t.tensor.scalar_type()));
    for (int64_t d = 1; d < t.tensor.dim(); ++d) absl::StrAppend(&key, ",", t.tensor.size(d));
  }
  return key;
}

// Fills in the batching fields of a routed job: its model's policy, and
// whether its inputs can be stacked with others.
void PrepareBatching(Job& job, bool batching_enabled, const std::vector<TensorMeta>& metas) {
  const ModelEntry& model = *job.route.model;
  const std::vector<NamedTensor>& inputs = job.request.inputs;
  job.policy = model.scheduling;
  if (batching_enabled && job.policy->max_batch_rows > 1) {
    bool batchable = true;
    for (const NamedTensor& t : inputs) {
      batchable = batchable && t.tensor.dim() >= 1 && t.tensor.size(0) == inputs[0].tensor.size(0);
    }
    if (batchable) {
      job.batch_key = BatchKey(job.route, inputs);
      job.rows = inputs[0].tensor.size(0);
    }
  }
  job.rows = std::max<int64_t>(job.rows, BatchRows(model.declared, metas));
}

// Fills in the queueing fields of a routed job from its model's policy and
// the request: its flow, priority level and queue deadline.
// INVALID_ARGUMENT for a priority outside the model's levels.
absl::Status PrepareQueueing(Job& job) {
  const ModelEntry& model = *job.route.model;
  job.flow = FlowKey{model.name, job.route.version};
  absl::StatusOr<uint32_t> level = model.scheduling->PriorityLevel(job.request.priority, model.name);
  if (!level.ok()) return level.status();
  job.priority_level = *level;
  if (const uint64_t timeout_us = model.scheduling->QueueTimeoutUs(job.request.timeout_us); timeout_us > 0) {
    job.queue_deadline = job.enqueued + std::chrono::microseconds(timeout_us);
  }
  return absl::OkStatus();
}

// " trace_ids=a,b" naming the traced requests of a batch, for a log line
// about the batch; "" when none is traced.
std::string TraceIdsOf(const std::vector<std::shared_ptr<Job>>& jobs) {
  std::string ids;
  for (const auto& job : jobs) {
    if (job->request.trace) absl::StrAppend(&ids, ids.empty() ? " trace_ids=" : ",", job->request.trace->trace_id_hex());
  }
  return ids;
}

}  // namespace

Scheduler::Scheduler(ModelRepository& repository, DeviceRegistry& devices, SchedulerOptions options,
                     ServableLoader loader)
    : repository_(repository),
      devices_(devices),
      options_(std::move(options)),
      state_file_(std::make_shared<StateFile>(options_.state_file)),
      learned_(state_file_, TorchVersion()),
      footprints_(state_file_, TorchVersion()),
      models_(repository, std::move(loader), &footprints_),
      accuracy_ledger_(state_file_, TorchVersion()),
      checker_(models_, repository, devices, accuracy_ledger_, PrecisionChecker::Options{options_.precision_checks},
               [this] {
                 DeviceExecutor* cpu = Executor(kCpu);
                 return cpu && cpu->queue_depth() == 0 && cpu->in_flight() == 0;
               }),
      planner_(repository, devices, learned_, options_.router, [this](const ModelKey& key, RouteCandidate* c) {
        if (DeviceExecutor* ex = Executor(key.device)) {
          c->queued = ex->queue_depth();
          c->running = ex->in_flight();
          c->workers = ex->workers();
        }
        c->resident = models_.IsResident(key);
        c->latency_us = latency_.Mean(key.model, key.device);
      }, &checker_),
      lifecycle_(repository, models_, devices) {
  int cores = static_cast<int>(LogicalCores());
  if (options_.cpu_workers <= 0) options_.cpu_workers = std::clamp(cores, 1, 4);
  if (options_.intra_op_threads <= 0) options_.intra_op_threads = std::max(1, cores / options_.cpu_workers);
  // Process-wide in LibTorch; each worker thread picks it up on first use.
  at::set_num_threads(options_.intra_op_threads);
  // The BLAS has a thread pool of its own, sized to every core by default.
  std::string blas = SetBlasThreads(options_.intra_op_threads);
  if (absl::Status s = learned_.Load(); !s.ok()) {
    LOG_WARNING << s.message() << "; starting with no learned device limits";
  }
  if (absl::Status s = footprints_.Load(); !s.ok()) {
    LOG_WARNING << s.message() << "; starting with no learned model sizes";
  }
  if (absl::Status s = accuracy_ledger_.Load(); !s.ok()) {
    LOG_WARNING << s.message() << "; starting with no accuracy check results";
  }
  for (const DeviceInfo& d : devices_.Snapshot()) {
    if (!d.available) continue;
    int workers = d.id.kind == DeviceKind::kCpu ? options_.cpu_workers : options_.accelerator_workers;
    DeviceExecutor::Options executor_options;
    executor_options.workers = workers;
    executor_options.capacity = options_.queue_capacity;
    executor_options.fair = options_.fair_queueing;
    executor_options.priority_aging = options_.priority_aging;
    // Each accelerator worker queues its batches on a stream of its own, so
    // --accelerator-workers can overlap them on the device (on the CPU and
    // simulated devices UseOwnStream does nothing).
    executor_options.on_worker_start = [d] {
      static LogRateLimiter limiter(1);
      if (absl::Status s = UseOwnStream(d); !s.ok()) {
        if (uint64_t held = 0; limiter.Allow(&held)) LOG_WARNING << s.message() << SuppressedNote(held);
      }
    };
    auto executor = std::make_unique<DeviceExecutor>(d.id, executor_options, [this](Batch& batch) { RunQueued(batch); });
    executor->set_spin_us(options_.worker_spin_us);
    executor->set_rejection_listener([this, id = d.id](const Job& job, RejectionReason reason) {
      observer_->OnRejected(id, job.model_label, reason);
    });
    executors_[d.id] = std::move(executor);
    auto budget = options_.cache_budgets.find(d.id);
    uint64_t bytes = budget != options_.cache_budgets.end()
                         ? budget->second
                         : static_cast<uint64_t>(static_cast<double>(d.memory_total_bytes) * options_.cache_budget_fraction);
    models_.SetBudget(d.id, bytes);
    // Apple silicon's MPS computes in the same memory as the CPU: one budget
    // for both (the CPU's), not a fraction of that memory each.
    const bool shares_host_memory = d.id.kind == DeviceKind::kMps && !d.simulated;
    if (shares_host_memory) models_.ShareBudget(d.id, DeviceId{DeviceKind::kCpu, 0});
    LOG_INFO << "device " << d.id.ToString() << ": " << workers << " worker(s), model cache budget "
             << (shares_host_memory ? "shared with the cpu (one memory)" : absl::StrCat(bytes, " bytes"));
  }
  LOG_INFO << "scheduler: " << options_.cpu_workers << " cpu workers x " << options_.intra_op_threads
           << " intra-op threads" << (blas.empty() ? "" : absl::StrCat(" (BLAS too, via ", blas, ")"))
           << ", queue capacity " << options_.queue_capacity << " per device, batching "
           << (options_.batching ? "on" : "off") << ", accuracy checks "
           << (options_.precision_checks ? "on" : "off");
  checker_.Start();
}

Scheduler::~Scheduler() { Shutdown(); }

void Scheduler::SetObserver(SchedulerObserver* observer) {
  observer_ = observer ? observer : &ignore_;
  models_.SetObserver(observer);
  lifecycle_.SetObserver(observer);
  checker_.SetObserver(observer);
}

void Scheduler::StartPolling(DiskRepository initial) {
  if (options_.repository_poll_interval.count() <= 0 || poller_) return;
  poller_ = std::make_unique<RepositoryPoller>(repository_.root(), lifecycle_);
  poller_->Start(options_.repository_poll_interval, std::move(initial));
  LOG_INFO << "following the model repository: polled every " << options_.repository_poll_interval.count() << " ms";
}

void Scheduler::Shutdown() {
  if (poller_) poller_->Stop();
  checker_.Stop();
  // Accelerators first: their last failures may still hand work to the CPU.
  for (auto& [id, executor] : executors_) {
    if (id.kind != DeviceKind::kCpu) executor->Stop();
  }
  for (auto& [id, executor] : executors_) executor->Stop();
}

bool Scheduler::Drain(Clock::time_point deadline) {
  draining_.store(true);
  if (poller_) poller_->Stop();  // no loads while draining
  checker_.Stop();
  bool idle = true;
  for (auto& [id, executor] : executors_) {
    if (id.kind != DeviceKind::kCpu) idle = executor->WaitIdle(deadline) && idle;
  }
  for (auto& [id, executor] : executors_) {
    if (id.kind == DeviceKind::kCpu) idle = executor->WaitIdle(deadline) && idle;
  }
  if (idle) return true;
  // Out of time: what is still queued is answered now, not run, so
  // --drain-timeout bounds the stop whether or not its callers are there
  // to cancel (a REST client is not) and they hear why while the ports are
  // still open. Batches running finish.
  const absl::Status stopping =
      DrainRefusal("server is stopping: its drain timeout passed with this request still queued; it was not run");
  size_t refused = 0;
  for (auto& [id, executor] : executors_) refused += executor->RefuseQueued(stopping);
  if (refused > 0) {
    LOG_WARNING << "drain timeout: " << refused << " queued request(s) answered UNAVAILABLE without running";
  }
  return false;
}

DeviceExecutor* Scheduler::Executor(const DeviceId& device) const {
  auto it = executors_.find(device);
  return it == executors_.end() ? nullptr : it->second.get();
}

DeviceLoad Scheduler::Load(const DeviceId& device) const {
  DeviceExecutor* ex = Executor(device);
  if (!ex) return {};
  return {ex->queue_depth(), ex->QueueDepthByModel(), ex->OldestRunningAge(), ex->in_flight(),
          ex->busy_us(),     ex->workers(),           ex->capacity()};
}

void Scheduler::NoteQueued(const Job& job) {
  RequestTrace* trace = job.request.trace.get();
  if (!trace) return;
  trace->Queued(job.route.device.id.ToString(), job.route.fallback ? job.route.fallback->ToString() : "",
                job.priority_level, Clock::now());
}

void Scheduler::NoteRan(const BatchRun& run, Clock::time_point model_ready, DType dtype) {
  const Clock::time_point inputs_joined = model_ready + std::chrono::nanoseconds(run.times.input_ns);
  const Clock::time_point computed = inputs_joined + std::chrono::nanoseconds(run.times.infer_ns);
  const Clock::time_point outputs_split = computed + std::chrono::nanoseconds(run.times.output_ns);
  const auto rows = static_cast<uint32_t>(run.total_rows());
  for (size_t j = 0; j < run.jobs.size(); ++j) {
    RequestTrace* trace = run.jobs[j]->request.trace.get();
    if (!trace) continue;
    std::vector<TraceSpanRef> companions;
    for (size_t k = 0; k < run.jobs.size(); ++k) {
      if (k != j && run.jobs[k]->request.trace) companions.push_back(run.jobs[k]->request.trace->self());
    }
    trace->Ran(inputs_joined, computed, outputs_split, rows, std::move(companions), DTypeName(dtype));
  }
}

void Scheduler::ReportFallback(const std::string& from, const DeviceId& to, const FallbackReason& reason) {
  observer_->OnFallback(from, to.ToString(), std::string(FallbackKindName(reason.kind)));
}

std::shared_ptr<RequestHandle> Scheduler::Submit(InferenceRequest request, InferCallback done) {
  auto job = std::make_shared<Job>();
  job->set_done(std::move(done));
  if (draining_.load()) {
    job->model_label = repository_.Known(request.model) ? request.model : "";
    observer_->OnRejected(DeviceId{}, job->model_label, RejectionReason::kDraining);
    job->Finish(DrainingRefusal());
    return job;
  }
  absl::StatusOr<Route> route = planner_.Plan(
      {request.model, request.version, request.device, request.precision, request.allow_fallback});
  if (!route.ok()) {
    job->model_label = repository_.Known(request.model) ? request.model : "";
    job->Finish(route.status());
    return job;
  }
  if (const std::optional<FallbackReason>& reason = route->fallback) {
    // An absent device is labelled by kind, since clients choose the index.
    const DeviceRequest& asked = route->requested;
    ReportFallback(reason->kind == FallbackKind::kDeviceUnavailable ? std::string(DeviceKindName(asked.kind))
                                                                    : asked.ToString(),
                   route->device.id, *reason);
  }
  const ModelEntry& model = *route->model;
  // Check against what config.pbtxt declares before taking a queue slot. A
  // request refused here was never routed: metrics count it by model only.
  job->model_label = model.name;
  std::vector<TensorMeta> metas = TensorMetas(request.inputs);
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
  job->route = *std::move(route);
  job->routed = true;
  job->statistics = &statistics_;
  job->request = std::move(request);
  PrepareBatching(*job, options_.batching, metas);
  job->enqueued = Clock::now();
  if (absl::Status s = PrepareQueueing(*job); !s.ok()) {
    job->Finish(s);
    return job;
  }
  if (const std::optional<DType>& check = job->route.precision_check) {
    checker_.Request(job->route, *check, &job->request.inputs);
  }
  const DeviceId device = job->route.device.id;
  DeviceExecutor* ex = Executor(device);
  if (!ex) {
    job->Finish(absl::UnavailableError(absl::StrCat("device: ", device.ToString(), " has no executor")));
    return job;
  }
  NoteQueued(*job);
  std::optional<RejectionReason> refusal;
  if (absl::Status s = ex->Submit(job, &refusal); !s.ok()) {
    if (refusal) observer_->OnRejected(device, job->model_label, *refusal);
    job->Finish(s);
  }
  return job;
}

void Scheduler::RunQueued(Batch& batch) {
  Clock::time_point now = Clock::now();
  Batch live;
  live.reserve(batch.size());
  for (auto& job : batch) {
    const DeviceId& device = job->route.device.id;
    if (job->cancelled.load()) {
      observer_->OnRejected(device, job->model_label, RejectionReason::kCancelled);
      job->Finish(absl::CancelledError("request cancelled by the client while queued"));
    } else if (now > job->request.deadline) {
      observer_->OnRejected(device, job->model_label, RejectionReason::kDeadline);
      job->Finish(absl::DeadlineExceededError(
          absl::StrCat("model '", job->route.model->name, "': deadline passed after ",
                       MicrosBetween(job->enqueued, now), " us waiting in the queue of ", device.ToString(),
                       "; the request was not run")));
    } else {
      live.push_back(job);
    }
  }
  if (!live.empty()) Execute(live, /*oom_retried=*/false);
}

void Scheduler::Execute(Batch& jobs, bool oom_retried) {
  // The repository may have swapped files or versions while these waited.
  // A batch moves to another version only if every request in it asked for
  // the latest; all of them move alike, so the batch stays one model.
  // One look at the repository per batch, not per request: the jobs share
  // model and version, and every job takes the newest route found.
  const bool all_latest = std::all_of(jobs.begin(), jobs.end(), [](const auto& j) { return j->route.latest; });
  auto refresh = [&] {
    // The first job's route is refreshed in place (no copy of the route
    // per batch); Refresh leaves it as it was when it answers false.
    Route& first = jobs[0]->route;
    if (!models_.Refresh(first, all_latest)) return false;
    for (size_t j = 1; j < jobs.size(); ++j) {
      Route& r = jobs[j]->route;
      r.model = first.model;
      r.version = first.version;
      r.generation = first.generation;
      r.stamp = first.stamp;
    }
    return true;
  };
  refresh();
  const Route& route = jobs[0]->route;
  const DeviceId device = route.device.id;
  Clock::time_point started = Clock::now();
  absl::StatusOr<ModelCache::Lease> lease = models_.Acquire(route);
  // The repository may also have moved on between that look and the load:
  // the copy planned for was unloaded and its file is gone or replaced.
  // One more look, and the newest route, before the request fails for it;
  // if the repository serves no newer route, the request is told what it
  // says (the model or version was removed), not that a file is missing.
  if (!lease.ok() && (absl::IsNotFound(lease.status()) || absl::IsUnavailable(lease.status())) &&
      !DeviceFailureOf(lease.status())) {
    if (refresh()) {
      lease = models_.Acquire(route);
    } else if (absl::Status answer = models_.RepositoryAnswer(route, all_latest); !answer.ok()) {
      lease = answer;
    }
  }
  if (!lease.ok()) return HandleFailure(jobs, lease.status(), oom_retried, "loading");
  const Clock::time_point model_ready = Clock::now();
  for (auto& job : jobs) {
    if (job->request.trace) job->request.trace->Started(started, model_ready, lease->waited_for_load());
  }

  // On a CPU worker with one intra-op thread, the thread's CPU time is the
  // batch's cost without the time other threads took the core away; that is
  // what batch sizing learns from (compute_us, reported, stays wall time).
  const bool own_cpu = device.kind == DeviceKind::kCpu && options_.intra_op_threads == 1;
  BatchRun run = RunBatch(**lease, jobs, own_cpu);
  if (run.jobs.empty()) return;
  if (!run.outputs.ok()) return HandleFailure(run.jobs, run.outputs.status(), oom_retried, "running");

  const int64_t total_rows = run.total_rows();
  latency_.Observe(route.model->name, device,
                   static_cast<double>(run.compute_us) / static_cast<double>(run.jobs.size()));
  if (!run.jobs[0]->batch_key.empty() && run.jobs.size() == jobs.size()) {
    if (DeviceExecutor* ex = Executor(device)) {
      ex->RecordBatchCost(run.jobs[0]->batch_key, total_rows, own_cpu ? run.cpu_us : run.compute_us);
    }
  }
  statistics_.RecordBatch(route.model->name, route.version, static_cast<uint64_t>(total_rows), run.times);
  if (checker_.WantsRunningCheck(route)) {
    checker_.OfferRunningCheck(route, run.jobs[0]->request.inputs, (*run.outputs)[0]);
  }
  const DType dtype = (*lease)->compute_dtype();
  NoteRan(run, model_ready, dtype);
  // The lease ends before the answers go out, so a client's next request
  // (an unload, or a load that must evict) never finds this model in use.
  *lease = ModelCache::Lease();
  const std::string device_name = device.ToString();
  Clock::time_point finished = Clock::now();
  for (size_t j = 0; j < run.jobs.size(); ++j) {
    Job& job = *run.jobs[j];
    InferenceResult result;
    result.outputs = std::move((*run.outputs)[j]);
    result.placement.device = device_name;
    result.placement.requested_device = job.request.device;
    result.placement.dtype = dtype;
    result.placement.fell_back = job.route.fallback.has_value();
    if (job.route.fallback) result.placement.fallback_reason = job.route.fallback->ToString();
    result.placement.precision_reason = job.route.precision_reason;
    result.placement.batch_size = static_cast<uint32_t>(total_rows);
    result.placement.model_version = job.route.version;
    result.batched = job.route.model->config.max_batch_size() > 0;
    result.labels = job.route.model->labels;
    result.timing.queue_us = MicrosBetween(job.enqueued, started);
    result.timing.compute_us = run.compute_us;
    result.timing.total_us = MicrosBetween(job.request.received, finished);
    result.timing.compute_input_ns = run.times.input_ns;
    result.timing.compute_infer_ns = run.times.infer_ns;
    result.timing.compute_output_ns = run.times.output_ns;
    job.Finish(std::move(result));
  }
}

void Scheduler::HandleFailure(Batch& jobs, const absl::Status& failure, bool oom_retried, const char* stage) {
  const Route& route = jobs[0]->route;
  const DeviceId device = route.device.id;
  FailureDecision decision = DecideOnFailure(failure, device, oom_retried);
  for (auto& job : jobs) {
    if (job->request.trace) job->request.trace->Failed(stage, failure.message());
  }
  switch (decision.action) {
    case FailureAction::kFail:
      for (auto& job : jobs) job->Finish(failure);
      return;
    case FailureAction::kEvictAndRetry: {
      ModelKey keep = route.key();
      static LogRateLimiter limiter(5);
      if (uint64_t held = 0; limiter.Allow(&held)) {
        LOG_WARNING << "out of memory while " << stage << " " << keep.ToString()
                    << "; evicting idle models and retrying once" << TraceIdsOf(jobs)
                    << SuppressedNote(held);
      }
      models_.EvictIdleAfterOom(device, keep);
      for (auto& job : jobs) NoteQueued(*job);  // the retry is an attempt of its own
      return Execute(jobs, /*oom_retried=*/true);
    }
    case FailureAction::kRememberAndFallBack:
      if (learned_.Record(route.model->name, route.stamp.ContentKey(), device.kind, *decision.reason)) {
        LOG_WARNING << "model '" << route.model->name << "' cannot run on " << DeviceKindName(device.kind) << " ("
                    << decision.reason->ToString() << "); its requests go to the cpu from now on" << TraceIdsOf(jobs);
      }
      break;
    case FailureAction::kTakeOutOfService:
      devices_.MarkUnhealthy(device, Clock::now() + options_.device_failure_cooldown);
      LOG_WARNING << "device " << device.ToString() << " failed (" << failure.message() << "); out of service for "
                  << options_.device_failure_cooldown.count() << " ms" << TraceIdsOf(jobs);
      break;
    case FailureAction::kFallBack:
      break;
  }
  FallBack(jobs, *decision.reason, failure);
}

void Scheduler::FallBack(Batch& jobs, const FallbackReason& reason, const absl::Status& failure) {
  DeviceExecutor* cpu = Executor(kCpu);
  for (auto& job : jobs) {
    absl::StatusOr<Route> moved = planner_.FallBackToCpu(job->route, reason, job->request.precision,
                                                         job->request.allow_fallback, failure);
    if (!moved.ok() || !cpu) {
      // Out of memory or an unavailable device keep their own code when the
      // client denied fallback; other device failures become FAILED_PRECONDITION.
      bool keep_code = absl::IsResourceExhausted(failure) || absl::IsUnavailable(failure);
      job->Finish(keep_code ? failure : (moved.ok() ? absl::UnavailableError("device: no cpu executor") : moved.status()));
      continue;
    }
    ReportFallback(job->route.device.id.ToString(), kCpu, reason);
    static LogRateLimiter limiter(5);
    if (uint64_t held = 0; limiter.Allow(&held)) {
      LOG_INFO << "retrying model '" << job->route.model->name << "' on cpu after " << job->route.device.id.ToString()
               << " failed (" << reason.ToString() << ")" << TraceIdSuffix(job->request)
               << SuppressedNote(held);
    }
    job->route = *std::move(moved);
    job->batch_key.clear();
    NoteQueued(*job);
    if (absl::Status s = cpu->Submit(job); !s.ok()) job->Finish(s);
  }
}

void Scheduler::LoadModel(const LoadRequest& request, std::function<void(absl::StatusOr<LoadResult>)> done) {
  if (draining_.load()) return done(absl::UnavailableError("server is draining; it loads no models"));
  DeviceExecutor* cpu = Executor(kCpu);
  if (!cpu) return done(absl::UnavailableError("device: no cpu executor"));
  auto shared_done = std::make_shared<std::function<void(absl::StatusOr<LoadResult>)>>(std::move(done));
  // An explicit load first re-reads the model's folder (picking up what
  // changed on disk, loading new files before they answer): disk I/O and
  // perhaps loads, so on a cpu worker rather than the caller's thread.
  absl::Status submitted = cpu->SubmitTask([this, request, shared_done] {
    if (absl::Status synced =
            lifecycle_.SyncModel(request.model, request.config_override, {request.files, request.folder});
        !synced.ok()) {
      return (*shared_done)(synced);
    }
    // A load may take its time: the precision it loads in is checked first.
    CheckPrecisionNow(request.model, request.version, request.device.empty() ? "auto" : request.device,
                      request.precision, "load");
    absl::StatusOr<Route> route =
        planner_.Plan({request.model, request.version, request.device, request.precision, /*allow_fallback=*/false});
    if (!route.ok()) return (*shared_done)(route.status());
    DeviceExecutor* ex = Executor(route->device.id);
    if (!ex) {
      return (*shared_done)(
          absl::UnavailableError(absl::StrCat("device: ", route->device.id.ToString(), " has no executor")));
    }
    absl::Status queued = ex->SubmitTask([this, r = *std::move(route), shared_done] {
      Clock::time_point start = Clock::now();
      // The lease ends before the answer goes out, so a client that unloads the
      // model right after this reply never finds it still in use.
      if (absl::Status loaded = models_.Acquire(r).status(); !loaded.ok()) return (*shared_done)(loaded);
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

absl::StatusOr<size_t> Scheduler::UnloadModel(const LoadRequest& request) {
  // The whole model (Triton's unload) takes it out of service; a version,
  // device or precision only drops resident copies, which load again on
  // demand.
  if (request.version.empty() && request.device.empty() && request.precision == Precision::kAuto) {
    if (absl::Status s = ValidateModelName(request.model); !s.ok()) return s;
    return lifecycle_.Unload(request.model);
  }
  return models_.Unload(request);
}

void Scheduler::ForgetModel(const std::string& name) { lifecycle_.Forget(name); }

absl::StatusOr<uint64_t> Scheduler::PredictFootprint(const std::string& name, const std::string& folder) const {
  absl::StatusOr<DiskModel> disk = ScanModelFolder(folder, name);
  if (!disk.ok()) return disk.status();
  std::shared_ptr<ModelEntry> entry = NewModelEntry(repository_.root(), name);
  entry->dir = folder;
  absl::StatusOr<v1::ModelConfig> config = ReadModelConfig(folder, name, ConfigNaming::kServedAs);
  if (!config.ok()) return config.status();
  entry->SetConfig(*std::move(config));
  // The device a cold start loads it on, in the dtype `auto` serves there.
  std::optional<DeviceInfo> device = RoutePlanner::ColdStartDevice(devices_, entry->config);
  if (!device) return absl::FailedPreconditionError("no available device is allowed for the model");
  std::vector<int64_t> on_disk;
  for (const auto& [v, stamp] : disk->versions) on_disk.push_back(v);
  uint64_t total = 0;
  for (int64_t v : SelectVersions(entry->config.version_policy(), on_disk)) {
    const FileStamp& stamp = disk->versions.at(v);
    const DType dtype = RoutePlanner::ComputeDType(*entry, stamp, device->precision, Precision::kAuto);
    total += footprints_.Expect(name, stamp.ContentKey(), stamp.size, device->id.kind, dtype).total();
  }
  return total;
}

void Scheduler::CheckPrecisionNow(const std::string& model, const std::string& version, const std::string& device,
                                  Precision precision, const char* occasion) {
  if (!checker_.enabled()) return;
  // The first pick, then (if it failed) the other 16-bit dtype.
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<Route> route = planner_.Plan({model, version, device, precision, /*allow_fallback=*/true});
    if (!route.ok() || !route->precision_check) return;
    checker_.CheckNow(*route, *route->precision_check, occasion);
  }
}

void Scheduler::Warmup() {
  for (const ModelEntry& entry : repository_.List()) {
    if (!entry.config.warmup() || !entry.problem.ok()) continue;
    // Accuracy first, on every device the model may run on, so warm-up
    // loads the dtype that will serve.
    for (const DeviceId& id : devices_.Available()) {
      if (DeviceAllowed(entry.config, id)) CheckPrecisionNow(entry.name, "", id.ToString(), Precision::kAuto, "warm-up");
    }
    absl::StatusOr<Route> route = planner_.Plan({entry.name, "", "auto", Precision::kAuto, true});
    if (!route.ok()) {
      LOG_WARNING << "warm-up of model '" << entry.name << "' skipped: " << route.status().message();
      continue;
    }
    if (absl::Status s = models_.WarmUp(*route); !s.ok()) {
      LOG_WARNING << "warm-up of model '" << entry.name << "' failed: " << s.message();
    }
  }
}

}  // namespace infergate
