#include "scheduler/core/request_dispatcher.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "devices/device_failure.h"
#include "devices/simulation.h"
#include "scheduler/execution/batch_execution.h"
#include "scheduler/execution/drain_refusal.h"
#include "scheduler/execution/job.h"
#include "scheduler/execution/request_trace.h"
#include "scheduler/model/string_tensor.h"
#include "scheduler/repository/input_signature.h"
#include "scheduler/routing/failure_policy.h"
#include "scheduler/routing/ready_path.h"

namespace infergate {
namespace {

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

// Fills in the batching fields of a routed job: whether its inputs can be
// stacked with others, and how many rows they are.
void PrepareBatching(Job& job, bool batching_enabled, const std::vector<TensorMeta>& metas) {
  const ModelEntry& model = *job.route.model;
  const std::vector<NamedTensor>& inputs = job.request.inputs;
  if (batching_enabled && model.scheduling->max_batch_rows > 1) {
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
  ASSIGN_OR_RETURN(job.priority_level, model.scheduling->PriorityLevel(job.request.priority, model.name));
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
    if (job->request.trace)
      absl::StrAppend(&ids, ids.empty() ? " trace_ids=" : ",", job->request.trace->trace_id_hex());
  }
  return ids;
}

}  // namespace

RequestDispatcher::RequestDispatcher(CoreParts& core) : core_(core) {}

void RequestDispatcher::NoteQueued(const Job& job) {
  RequestTrace* trace = job.request.trace.get();
  if (!trace) return;
  trace->Queued(job.route.device.id.ToString(), job.route.fallback ? job.route.fallback->ToString() : "",
                job.priority_level, Clock::now());
  if (job.route.ready_path != nullptr) {
    trace->Routed(job.route.ready_path, job.route.expected_us, job.route.load_expected_us);
  }
}

void RequestDispatcher::ExpectCompute(Job& job) const {
  const double planned = job.route.compute_expected_us;
  job.expected_us = std::llround(core_.latency.Expected(job.route.model->name, job.route.device.id)
                                     .value_or(planned > 0 ? planned : core_.options.router.unmeasured_latency_us));
}

void RequestDispatcher::PromiseStart(Job& job) const {
  if (job.route.ready_path == nullptr || job.route.expected_us <= 0) return;
  // It finishes within its estimate's margin if it starts by then, its
  // compute as expected.
  const double latest_us =
      std::max(0.0, (1 + kRegretMargin) * job.route.expected_us - static_cast<double>(job.expected_us));
  job.start_by = job.enqueued + std::chrono::microseconds(std::llround(latest_us));
}

void RequestDispatcher::NoteRan(const BatchRun& run, Clock::time_point model_ready, DType dtype) {
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

void RequestDispatcher::ReportFallback(const std::string& from, const DeviceId& to, const FallbackReason& reason) {
  core_.observer->OnFallback(from, to.ToString(), std::string(FallbackKindName(reason.kind)));
}

std::shared_ptr<RequestHandle> RequestDispatcher::Submit(InferenceRequest request, InferCallback done) {
  auto job = std::make_shared<Job>();
  job->set_done(std::move(done));
  if (core_.draining.load()) {
    job->model_label = core_.repository.Known(request.model) ? request.model : "";
    core_.observer->OnRejected(DeviceId{}, job->model_label, RejectionReason::kDraining);
    job->Finish(DrainingRefusal());
    return job;
  }
  absl::StatusOr<Route> route =
      core_.planner.Plan({request.model, request.version, request.device, request.precision, request.allow_fallback});
  if (!route.ok()) {
    job->model_label = core_.repository.Known(request.model) ? request.model : "";
    job->Finish(route.status());
    return job;
  }
  core_.CountDemand(route->model->name, Clock::now());
  if (const std::optional<FallbackReason>& reason = route->fallback) {
    // An absent device is labelled by kind, since clients choose the index.
    const DeviceRequest& asked = route->requested;
    ReportFallback(
        reason->kind == FallbackKind::kDeviceUnavailable ? std::string(DeviceKindName(asked.kind)) : asked.ToString(),
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
  if (absl::Status text = CheckStringsAreText(request.inputs, model.name); !text.ok()) {
    job->Finish(text);
    return job;
  }
  job->route = *std::move(route);
  job->routed = true;
  job->statistics = &core_.statistics;
  job->request = std::move(request);
  PrepareBatching(*job, core_.options.batching, metas);
  job->enqueued = Clock::now();
  if (absl::Status s = PrepareQueueing(*job); !s.ok()) {
    job->Finish(s);
    return job;
  }
  if (const std::optional<DType>& check = job->route.precision_check) {
    core_.checker.Request(job->route, *check, &job->request.inputs);
  }
  const DeviceId device = job->route.device.id;
  DeviceExecutor* ex = core_.executors.Find(device);
  if (!ex) {
    job->Finish(absl::UnavailableError(absl::StrCat("device: ", device.ToString(), " has no executor")));
    return job;
  }
  NoteQueued(*job);
  ExpectCompute(*job);
  PromiseStart(*job);
  // Load on arrival: queued once its model is loaded, so no worker waits
  // for the transfer. Its reservation (made before the hold, whose release
  // may come first) ends as it is queued (DeviceExecutor::Submit).
  if (core_.LoadsOnArrival(job->route)) {
    if (core_.options.router.load_and_run_reserves && job->route.load_expected_us > 0) {
      job->reservation = ex->Reserve(job->route.load_expected_us, static_cast<double>(job->expected_us));
    }
    if (core_.HoldForLoad(job->route, [this, job, ex](ArrivalLoads::Hold hold) {
          job->model_hold = std::move(hold);
          const Clock::time_point released = Clock::now();
          job->held_us = MicrosBetween(job->enqueued, released);
          if (RequestTrace* trace = job->request.trace.get()) trace->Released(released);
          Queue(job, *ex);
        })) {
      return job;
    }
  }
  Queue(job, *ex);
  return job;
}

void RequestDispatcher::Queue(const std::shared_ptr<Job>& job, DeviceExecutor& ex) {
  std::optional<RejectionReason> refusal;
  if (absl::Status s = ex.Submit(job, &refusal); !s.ok()) {
    if (refusal) core_.observer->OnRejected(job->route.device.id, job->model_label, *refusal);
    job->Finish(s);
  }
}

void RequestDispatcher::RunQueued(Batch& batch) {
  Clock::time_point now = Clock::now();
  Batch live;
  live.reserve(batch.size());
  for (auto& job : batch) {
    const DeviceId& device = job->route.device.id;
    if (job->cancelled.load()) {
      core_.observer->OnRejected(device, job->model_label, RejectionReason::kCancelled);
      job->Finish(absl::CancelledError("request cancelled by the client while queued"));
    } else if (now > job->request.deadline) {
      core_.observer->OnRejected(device, job->model_label, RejectionReason::kDeadline);
      job->Finish(absl::DeadlineExceededError(absl::StrCat(
          "model '", job->route.model->name, "': deadline passed after ", MicrosBetween(job->enqueued, now),
          " us waiting in the queue of ", device.ToString(), "; the request was not run")));
    } else {
      live.push_back(job);
    }
  }
  if (!live.empty()) Execute(live, /*oom_retried=*/false);
}

void RequestDispatcher::Execute(Batch& jobs, bool oom_retried) {
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
    if (!core_.models.Refresh(first, all_latest)) return false;
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
  // Requests held for their model's load on arrival whose copy an unload or
  // a removal dropped since run on that copy (they were accepted before it):
  // the first held job's hold decides, asked once. The hold is kept here
  // too while the batch runs: a job answered early (RunBatch) drops its own.
  ArrivalLoads::Hold held_for_run;
  for (const auto& job : jobs) {
    if (job->model_hold != nullptr) {
      held_for_run = job->model_hold;
      break;
    }
  }
  const ModelCache::Lease* held = core_.DroppedHeldCopy(held_for_run, route.key());
  absl::StatusOr<ModelCache::Lease> lease = ModelCache::Lease();
  if (held == nullptr) {
    core_.MakeStagingRoom(route);  // a request's load onto an accelerator takes staged copies' room, not the policy's
    lease = core_.models.Acquire(route);
  }
  // The repository may also have moved on between that look and the load:
  // the copy planned for was unloaded and its file is gone or replaced.
  // One more look, and the newest route, before the request fails for it;
  // if the repository serves no newer route, the request is told what it
  // says (the model or version was removed), not that a file is missing.
  if (!lease.ok() && (absl::IsNotFound(lease.status()) || absl::IsUnavailable(lease.status())) &&
      !DeviceFailureOf(lease.status())) {
    if (refresh()) {
      lease = core_.models.Acquire(route);
    } else if (absl::Status answer = core_.models.RepositoryAnswer(route, all_latest); !answer.ok()) {
      lease = answer;
    }
  }
  if (!lease.ok()) return HandleFailure(jobs, lease.status(), oom_retried, "loading");
  const ModelCache::Lease& copy = held != nullptr ? *held : *lease;
  const Clock::time_point model_ready = Clock::now();
  const bool waited_for_load = held == nullptr && lease->waited_for_load();  // a held request waited before it queued
  if (waited_for_load) core_.observer->OnWaitedForLoad(device, jobs.size());
  for (auto& job : jobs) {
    if (job->request.trace) job->request.trace->Started(started, model_ready, waited_for_load);
  }

  // On a CPU worker with one intra-op thread, the thread's CPU time is the
  // batch's cost without the time other threads took the core away; that is
  // what batch sizing learns from (compute_us, reported, stays wall time).
  const bool own_cpu = device.kind == DeviceKind::kCpu && core_.options.intra_op_threads == 1;
  BatchRun run = RunBatch(*copy, jobs, own_cpu);
  if (run.jobs.empty()) return;
  if (!run.outputs.ok()) return HandleFailure(run.jobs, run.outputs.status(), oom_retried, "running");
  if (device.kind == DeviceKind::kCpu && core_.options.simulated_cpu_slowdown > 1) {
    SlowDownAsSimulated(route.key(), run, own_cpu);
  }

  const int64_t total_rows = run.total_rows();
  core_.latency.Observe(route.model->name, device, static_cast<double>(run.compute_us));
  if (!run.jobs[0]->batch_key.empty() && run.jobs.size() == jobs.size()) {
    if (DeviceExecutor* ex = core_.executors.Find(device)) {
      ex->RecordBatchCost(run.jobs[0]->batch_key, total_rows, own_cpu ? run.cpu_us : run.compute_us);
    }
  }
  core_.statistics.RecordBatch(route.model->name, route.version, static_cast<uint64_t>(total_rows), run.times);
  if (core_.checker.WantsRunningCheck(route)) {
    core_.checker.OfferRunningCheck(route, run.jobs[0]->request.inputs, (*run.outputs)[0]);
  }
  const DType dtype = copy->compute_dtype();
  NoteRan(run, model_ready, dtype);
  // The lease ends before the answers go out, so a client's next request
  // (an unload, or a load that must evict) never finds this model in use.
  // (A held copy goes with its requests' holds as they are answered: the
  // cache no longer has it.)
  *lease = ModelCache::Lease();
  held_for_run.reset();
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
    result.timing.load_wait_us = job.held_us;
    result.timing.compute_input_ns = run.times.input_ns;
    result.timing.compute_infer_ns = run.times.infer_ns;
    result.timing.compute_output_ns = run.times.output_ns;
    if (job.route.ready_path != nullptr) {
      result.placement.ready_path = job.route.ready_path;
      result.placement.ready_path_expected_us = job.route.expected_us;
      result.placement.ready_path_load_us = job.route.load_expected_us;
      core_.observer->OnReadyPathAnswered(job.route.ready_path, device_name, job.route.expected_us > 0,
                                          IsRegret(job.route.expected_us, static_cast<double>(result.timing.total_us)));
    }
    job.Finish(std::move(result));
  }
}

void RequestDispatcher::SlowDownAsSimulated(const ModelKey& key, BatchRun& run, bool own_cpu) const {
  // The worker is held for the whole simulated time, as a slower CPU would
  // hold it; the wait takes no CPU from the simulated accelerators.
  const auto extra = std::chrono::microseconds(
      static_cast<int64_t>(core_.SimulatedCpuExtraUs(key, run.total_rows(), run.compute_us, run.cpu_us)));
  std::this_thread::sleep_for(extra);
  run.compute_us += static_cast<uint64_t>(extra.count());
  if (own_cpu) run.cpu_us = run.compute_us;  // the slower CPU's own time for the run
}

void RequestDispatcher::HandleFailure(Batch& jobs, const absl::Status& failure, bool oom_retried, const char* stage) {
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
                    << "; evicting idle models and retrying once" << TraceIdsOf(jobs) << SuppressedNote(held);
      }
      core_.models.EvictIdleAfterOom(device, keep);
      for (auto& job : jobs) NoteQueued(*job);  // the retry is an attempt of its own
      return Execute(jobs, /*oom_retried=*/true);
    }
    case FailureAction::kRememberAndFallBack:
      if (core_.learned.Record(route.model->name, route.stamp.ContentKey(), device.kind, *decision.reason)) {
        LOG_WARNING << "model '" << route.model->name << "' cannot run on " << DeviceKindName(device.kind) << " ("
                    << decision.reason->ToString() << "); its requests go to the cpu from now on" << TraceIdsOf(jobs);
      }
      break;
    case FailureAction::kTakeOutOfService:
      core_.devices.MarkUnhealthy(device, Clock::now() + core_.options.device_failure_cooldown);
      LOG_WARNING << "device " << device.ToString() << " failed (" << failure.message() << "); out of service for "
                  << core_.options.device_failure_cooldown.count() << " ms" << TraceIdsOf(jobs);
      break;
    case FailureAction::kFallBack: break;
  }
  FallBack(jobs, *decision.reason, failure);
}

void RequestDispatcher::FallBack(Batch& jobs, const FallbackReason& reason, const absl::Status& failure) {
  DeviceExecutor* cpu = core_.executors.Find(kCpuDevice);
  for (auto& job : jobs) {
    absl::StatusOr<Route> moved =
        core_.planner.FallBackToCpu(job->route, reason, job->request.precision, job->request.allow_fallback, failure);
    if (!moved.ok() || !cpu) {
      // Out of memory or an unavailable device keep their own code when the
      // client denied fallback; other device failures become FAILED_PRECONDITION.
      bool keep_code = absl::IsResourceExhausted(failure) || absl::IsUnavailable(failure);
      job->Finish(keep_code ? failure
                            : (moved.ok() ? absl::UnavailableError("device: no cpu executor") : moved.status()));
      continue;
    }
    ReportFallback(job->route.device.id.ToString(), kCpuDevice, reason);
    static LogRateLimiter limiter(5);
    if (uint64_t held = 0; limiter.Allow(&held)) {
      LOG_INFO << "retrying model '" << job->route.model->name << "' on cpu after " << job->route.device.id.ToString()
               << " failed (" << reason.ToString() << ")" << TraceIdSuffix(job->request) << SuppressedNote(held);
    }
    job->route = *std::move(moved);
    job->batch_key.clear();
    job->start_by = Clock::time_point::max();  // its ready path's promise was for the device it left
    NoteQueued(*job);
    ExpectCompute(*job);
    if (absl::Status s = cpu->Submit(job); !s.ok()) job->Finish(s);
  }
}

}  // namespace infergate
