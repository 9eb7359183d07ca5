#include "absl/strings/string_view.h"
#include "scheduler/scheduler.h"

#include <ATen/Parallel.h>
#include <ATen/ops/zeros.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "devices/logging.h"
#include "devices/system_info.h"
#include "devices/torch_dtype.h"
#include "scheduler/loaded_model.h"

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

Precision FromConfigPrecision(int p) {
  switch (p) {
    case v1::FP32: return Precision::kFp32;
    case v1::FP16: return Precision::kFp16;
    case v1::BF16: return Precision::kBf16;
    default: return Precision::kAuto;
  }
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

}  // namespace

Scheduler::Scheduler(ModelRepository& repository, DeviceRegistry& devices, SchedulerOptions options)
    : repository_(repository), devices_(devices), options_(options) {
  int cores = static_cast<int>(LogicalCores());
  if (options_.cpu_workers <= 0) options_.cpu_workers = std::clamp(cores, 1, 4);
  if (options_.intra_op_threads <= 0) options_.intra_op_threads = std::max(1, cores / options_.cpu_workers);
  // Process-wide in LibTorch; each worker thread picks it up on first use.
  at::set_num_threads(options_.intra_op_threads);
  for (const DeviceId& id : devices_.Available()) {
    int workers = id.kind == DeviceKind::kCpu ? options_.cpu_workers : 1;
    executors_[id] = std::make_unique<DeviceExecutor>(id, workers, options_.queue_capacity);
  }
  LOG_INFO << "scheduler: " << options_.cpu_workers << " cpu workers x " << options_.intra_op_threads
           << " intra-op threads, queue capacity " << options_.queue_capacity << " per device";
}

Scheduler::~Scheduler() { Shutdown(); }

void Scheduler::Shutdown() {
  for (auto& [id, executor] : executors_) executor->Stop();
}

DeviceLoad Scheduler::Load(const DeviceId& device) const {
  auto it = executors_.find(device);
  if (it == executors_.end()) return {};
  return {it->second->queue_depth(), it->second->in_flight()};
}

absl::StatusOr<Scheduler::Route> Scheduler::Plan(absl::string_view model, absl::string_view version,
                                                 absl::string_view device, Precision precision,
                                                 bool allow_fallback) {
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
  if (wanted->automatic) {
    bool found = false;
    for (const DeviceId& id : devices_.Available()) {
      if (KindAllowed(config, id.kind)) {
        route.resolution.device = id;
        found = true;
        break;
      }
    }
    if (!found) {
      return absl::FailedPreconditionError(
          absl::StrCat("device: no available device is allowed for model '", route.model->name, "'"));
    }
  } else {
    absl::StatusOr<DeviceResolution> res = devices_.Resolve(*wanted, allow_fallback);
    if (!res.ok()) return res.status();
    route.resolution = *std::move(res);
    if (!KindAllowed(config, route.resolution.device.kind)) {
      std::string id = route.resolution.device.ToString();
      if (!allow_fallback || !KindAllowed(config, DeviceKind::kCpu)) {
        return absl::FailedPreconditionError(
            absl::StrCat("device: model '", route.model->name, "' may not run on ", id));
      }
      route.resolution.device = {DeviceKind::kCpu, 0};
      route.resolution.fell_back = true;
      route.resolution.fallback_reason = absl::StrCat("device_not_allowed:", id);
    }
  }
  std::optional<DeviceInfo> info = devices_.Find(route.resolution.device);
  if (!info) {
    return absl::UnavailableError(absl::StrCat("device: ", route.resolution.device.ToString(), " is not known"));
  }
  route.device = *std::move(info);
  const PrecisionTraits& traits = route.device.precision;
  bool float64_model = false;
  for (const InputSpec& in : route.model->declared.inputs) float64_model |= in.dtype == DType::kFloat64;
  route.dtype = ResolveComputeDType(traits, precision, FromConfigPrecision(config.precision()), float64_model);
  return route;
}

absl::StatusOr<std::shared_ptr<LoadedModel>> Scheduler::GetModel(const Route& route, bool* loaded) {
  ModelKey key{route.model->name, route.version, route.resolution.device, route.dtype};
  std::string path = repository_.ModelFile(*route.model, route.version);
  return cache_.GetOrLoad(
      key,
      [&]() -> absl::StatusOr<std::shared_ptr<LoadedModel>> {
        Clock::time_point start = Clock::now();
        auto model = LoadedModel::Load(path, route.model->config, route.device, route.dtype);
        if (model.ok()) {
          LOG_INFO << "loaded " << key.ToString() << " from " << path << " in "
                   << MicrosBetween(start, Clock::now()) / 1000 << " ms (" << (*model)->parameter_bytes()
                   << " parameter bytes)";
        }
        return model;
      },
      loaded);
}

void Scheduler::Infer(InferenceRequest request, InferCallback done) {
  absl::StatusOr<Route> route =
      Plan(request.model, request.version, request.device, request.precision, request.allow_fallback);
  if (!route.ok()) return done(route.status());
  // Check against what config.pbtxt declares before taking a queue slot.
  if (!route->model->declared.inputs.empty()) {
    std::vector<TensorMeta> metas = Metas(request.inputs);
    absl::StatusOr<std::vector<size_t>> order = MatchInputs(route->model->declared, metas, route->model->name);
    if (!order.ok()) return done(order.status());
  } else if (request.inputs.empty()) {
    return done(absl::InvalidArgumentError(
        absl::StrCat("inputs: request has no inputs for model '", route->model->name, "'")));
  }
  auto it = executors_.find(route->resolution.device);
  if (it == executors_.end()) {
    return done(absl::UnavailableError(
        absl::StrCat("device: ", route->resolution.device.ToString(), " has no executor")));
  }
  Clock::time_point enqueued = Clock::now();
  // The task owns the request; `done` is shared so it survives a refused Submit.
  auto shared_done = std::make_shared<InferCallback>(std::move(done));
  auto task = [this, r = *std::move(route), req = std::move(request), enqueued, shared_done]() mutable {
    RunInference(r, req, enqueued, *shared_done);
  };
  absl::Status submitted = it->second->Submit(std::move(task));
  if (!submitted.ok()) (*shared_done)(submitted);
}

void Scheduler::RunInference(const Route& route, InferenceRequest& request, Clock::time_point enqueued,
                             const InferCallback& done) {
  Clock::time_point started = Clock::now();
  if (started > request.deadline) {
    return done(absl::DeadlineExceededError(absl::StrCat("model '", route.model->name, "': deadline passed after ",
                                                         MicrosBetween(enqueued, started),
                                                         " us waiting in the queue of ",
                                                         route.resolution.device.ToString())));
  }
  absl::StatusOr<std::shared_ptr<LoadedModel>> model = GetModel(route, nullptr);
  if (!model.ok()) return done(model.status());
  const LoadedModel& m = **model;

  std::vector<TensorMeta> metas = Metas(request.inputs);
  absl::StatusOr<std::vector<size_t>> order = MatchInputs(m.signature(), metas, route.model->name);
  if (!order.ok()) return done(order.status());
  std::vector<at::Tensor> ordered;
  ordered.reserve(order->size());
  for (size_t i : *order) ordered.push_back(request.inputs[i].tensor);
  uint32_t rows = static_cast<uint32_t>(BatchRows(m.signature(), metas));

  Clock::time_point compute_start = Clock::now();
  absl::StatusOr<std::vector<NamedTensor>> outputs = m.Run(ordered);
  Clock::time_point compute_end = Clock::now();
  ordered.clear();
  if (!outputs.ok()) return done(outputs.status());

  InferenceResult result;
  result.outputs = *std::move(outputs);
  result.placement.device = route.resolution.device.ToString();
  result.placement.requested_device = request.device;
  result.placement.dtype = m.compute_dtype();
  result.placement.fell_back = route.resolution.fell_back;
  result.placement.fallback_reason = route.resolution.fallback_reason;
  result.placement.batch_size = rows;
  result.placement.model_version = route.version;
  result.timing.queue_us = MicrosBetween(enqueued, started);
  result.timing.compute_us = MicrosBetween(compute_start, compute_end);
  result.timing.total_us = MicrosBetween(request.received, compute_end);
  done(std::move(result));
}

void Scheduler::LoadModel(const LoadRequest& request, std::function<void(absl::StatusOr<LoadResult>)> done) {
  absl::StatusOr<Route> route = Plan(request.model, request.version, request.device, request.precision,
                                     /*allow_fallback=*/false);
  if (!route.ok()) return done(route.status());
  auto it = executors_.find(route->resolution.device);
  if (it == executors_.end()) {
    return done(absl::UnavailableError(
        absl::StrCat("device: ", route->resolution.device.ToString(), " has no executor")));
  }
  auto shared_done = std::make_shared<std::function<void(absl::StatusOr<LoadResult>)>>(std::move(done));
  absl::Status submitted = it->second->Submit([this, r = *std::move(route), shared_done] {
    Clock::time_point start = Clock::now();
    absl::StatusOr<std::shared_ptr<LoadedModel>> model = GetModel(r, nullptr);
    if (!model.ok()) return (*shared_done)(model.status());
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
    absl::StatusOr<std::shared_ptr<LoadedModel>> model = GetModel(*route, nullptr);
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
