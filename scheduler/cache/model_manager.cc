#include "scheduler/cache/model_manager.h"

#include <ATen/ops/zeros.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/thread_cpu_time.h"
#include "devices/activation_meter.h"
#include "devices/torch_dtype.h"
#include "scheduler/loaders/load_servable.h"
#include "scheduler/model/reshaped_servable.h"
#include "scheduler/model/torch_status.h"
#include "scheduler/model/warmup_samples.h"

namespace infergate {

namespace {

// The identity of `stamp`'s file for host copies: its content and inode.
std::string HostCopyContent(const FileStamp& stamp) { return absl::StrCat(stamp.ContentKey(), ":", stamp.inode); }

HostCopyKey HostCopyKeyOf(const Route& route, const std::string& path) {
  return HostCopyKey{route.model->name, path, HostCopyContent(route.stamp)};
}

}  // namespace

ModelManager::ModelManager(ModelRepository& repository, ServableLoader loader, ModelFootprints* footprints,
                           RunsAtOnce runs_at_once)
    : repository_(repository),
      loader_(std::move(loader)),
      runs_at_once_(std::move(runs_at_once)),
      footprints_(footprints),
      host_copies_(
          [this](uint64_t bytes) { return cache_.HoldOutsideCopies(kCpuDevice, bytes, "a host copy of weights"); },
          [this](uint64_t bytes) { cache_.ReleaseOutsideCopies(kCpuDevice, bytes); },
          [this] { return static_cast<uint64_t>(host_copy_share_ * cache_.Budget(kCpuDevice)); }) {
  cache_.SetEvictionListener([this](const ModelKey& key, uint64_t, EvictionReason why) {
    if (observer_) observer_->OnEviction(key.device, why);
    if (listener_.evicted) listener_.evicted(key, why);
  });
}

bool ModelManager::Refresh(Route& route, bool follow_latest) const {
  std::shared_ptr<const ModelEntry> current = repository_.Lookup(route.model->name);
  if (!current) return false;
  int64_t version = route.version;
  if (follow_latest && route.latest && !current->versions.empty()) version = current->versions.back();
  const VersionStatus* status = current->Status(version);
  if (!status || status->state != VersionState::kReady) return false;
  if (version == route.version && status->generation <= route.generation) return false;
  route.model = std::move(current);
  route.version = version;
  route.generation = status->generation;
  route.stamp = status->stamp;
  return true;
}

absl::Status ModelManager::RepositoryAnswer(const Route& route, bool follow_latest) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const ModelEntry> current, repository_.Find(route.model->name));
  const std::string version = follow_latest && route.latest ? "" : std::to_string(route.version);
  return repository_.ResolveVersion(*current, version).status();
}

Footprint ModelManager::Expected(const Route& route) const {
  if (!footprints_) return ModelFootprints::Estimate(route.stamp.size, route.dtype);
  return footprints_->Expect(route.model->name, route.stamp.ContentKey(), route.stamp.size, route.device.id.kind,
                             route.dtype);
}

absl::StatusOr<ModelCache::Lease> ModelManager::Acquire(const Route& route) {
  ModelKey key = route.key();
  if (std::optional<ModelCache::Lease> resident = cache_.AcquireResident(key)) {
    if (observer_) observer_->OnCacheLookup(key.device, /*hit=*/true);
    return *std::move(resident);
  }
  std::string path = repository_.ModelFile(*route.model, route.version);
  Footprint expected = Expected(route);
  absl::StatusOr<ModelCache::Lease> lease = cache_.Acquire(
      key,
      [&](const AdmitBytes& admit) -> absl::StatusOr<std::shared_ptr<Servable>> {
        // The file must be the one this generation was published for, before
        // and after reading it: a file replaced on disk is loaded only once
        // the poller has seen it settle, never half-written. A load from the
        // host copy of that file reads no file (it holds the published
        // content), so it stands even when the file has gone since.
        const HostCopyUse host = HostCopyUseFor(route, path);
        const bool from_host_copy = host.copy != nullptr;
        if (!from_host_copy) RETURN_IF_ERROR(SameFile(route, path));
        Clock::time_point start = Clock::now();
        LOG_INFO << "admitting " << key.ToString() << ": expects " << expected.total() << " bytes ("
                 << expected.parameter_bytes << " parameters + " << expected.activation_bytes << " activations, "
                 << expected.source << ")";
        // Learned as soon as the file is read, so a model too large for the
        // device is refused up front next time, without reading it again.
        AdmitBytes learn_then_admit = [&](uint64_t parameter_bytes) {
          if (footprints_) {
            footprints_->RecordParameters(key.model, route.stamp.ContentKey(), key.device.kind, key.dtype,
                                          parameter_bytes);
          }
          return admit(parameter_bytes);
        };
        // Triton's reshape, whatever the model file: the file is loaded for
        // the shapes it takes, and clients speak dims.
        absl::StatusOr<std::shared_ptr<Servable>> model =
            LoadCopy(route, path, ReshapedServable::ModelSide(route.model->config), learn_then_admit, host);
        if (model.ok()) model = ReshapedServable::Wrap(*std::move(model), route.model->config);
        if (model.ok()) {
          if (absl::Status same = from_host_copy ? absl::OkStatus() : SameFile(route, path); !same.ok()) {
            model = same;
          }
        }
        uint64_t took_us = MicrosBetween(start, Clock::now());
        if (observer_) observer_->OnModelLoad(key.model, key.device, took_us / 1e6, model.ok());
        if (model.ok() && footprints_) {
          footprints_->RecordParameters(key.model, route.stamp.ContentKey(), key.device.kind, key.dtype,
                                        (*model)->resident_bytes());
        }
        if (model.ok() && listener_.loaded)
          listener_.loaded(key, took_us, from_host_copy ? LoadSource::kHostCopy : LoadSource::kFile);
        if (model.ok()) {
          const std::chrono::microseconds transfer = (*model)->transfer_time();
          if (observer_ && transfer.count() > 0) {
            observer_->OnModelTransfer(key.model, key.device, (*model)->resident_bytes(), transfer.count() / 1e6);
          }
          LOG_INFO << "loaded " << key.ToString() << " (generation " << key.generation << ") from " << path << " in "
                   << took_us / 1000 << " ms (" << (*model)->resident_bytes() << " bytes"
                   << (transfer.count() > 0 ? absl::StrCat("; moved to the device in ", transfer.count() / 1000, " ms")
                                            : "")
                   << ")";
        }
        return model;
      },
      route.model->config.pinned(), expected);
  if (observer_) observer_->OnCacheLookup(key.device, lease.ok() && !lease->loaded_now());
  if (lease.ok() && lease->loaded_now()) DropIfOutOfService(route);
  return lease;
}

HostCopyUse ModelManager::HostCopyUseFor(const Route& route, const std::string& path) {
  HostCopyUse host;
  if (host_copy_share_ <= 0 || loader_) return host;  // a loader of its own never sees host copies
  host.store = &host_copies_;
  host.key = HostCopyKeyOf(route, path);
  // The copies that may move are the accelerators' (and, when set, every
  // copy's, so a model first loaded on the CPU moves from host memory); the
  // CPU's copy of a demoted model starts from one when there is one.
  host.keep = route.device.id.kind != DeviceKind::kCpu || host_copies_of_cpu_loads_;
  // Found once, here: the load starts from this copy (held until it is
  // done), so whether the file is checked and whether it is read are one
  // decision, even if the store drops the copy meanwhile.
  host.copy = host_copies_.Find(host.key);
  return host;
}

bool ModelManager::HasHostCopy(const Route& route) const {
  if (host_copy_share_ <= 0 || loader_) return false;
  return host_copies_.Contains(HostCopyKeyOf(route, repository_.ModelFile(*route.model, route.version)));
}

absl::StatusOr<std::shared_ptr<Servable>> ModelManager::LoadCopy(const Route& route, const std::string& path,
                                                                 const v1::ModelConfig& config, const AdmitBytes& admit,
                                                                 const HostCopyUse& host) {
  if (loader_) return loader_(path, config, route.device, route.dtype, admit);
  return DefaultLoad(path, config, route.device, route.dtype, admit, host);
}

absl::StatusOr<std::shared_ptr<Servable>> ModelManager::DefaultLoad(const std::string& path,
                                                                    const v1::ModelConfig& config,
                                                                    const DeviceInfo& device, DType dtype,
                                                                    const AdmitBytes& admit,
                                                                    const HostCopyUse& host) const {
  return LoadServable(path, config, device, dtype, admit, runs_at_once_ ? runs_at_once_(device.id, config) : 1, host);
}

absl::Status ModelManager::SameFile(const Route& route, const std::string& path) {
  if (!route.stamp.exists()) return absl::OkStatus();  // published without a stamp (tests)
  FileStamp now = StampFile(path);
  if (now == route.stamp) return absl::OkStatus();
  if (!now.exists()) {
    return absl::NotFoundError(
        absl::StrCat("model '", route.model->name, "' version ", route.version, " is gone from disk (", path, ")"));
  }
  return absl::UnavailableError(absl::StrCat("model '", route.model->name, "' version ", route.version,
                                             ": its model.pt changed on disk since it was published; the new file "
                                             "is served once the repository poller has loaded it, retry shortly"));
}

absl::Status ModelManager::CheckLoads(const std::string& path, const v1::ModelConfig& config,
                                      const DeviceInfo& device) const {
  const AdmitBytes admit_all = [](uint64_t) { return absl::OkStatus(); };
  const v1::ModelConfig model_side = ReshapedServable::ModelSide(config);
  // Read from the file, never from or into a host copy: whether it loads is
  // the question. A loader that throws (the loaders catch LibTorch's own, so
  // a programming error) refuses this version, as a load through the cache
  // does; it must not end the process.
  try {
    return (loader_ ? loader_(path, model_side, device, DType::kFloat32, admit_all)
                    : DefaultLoad(path, model_side, device, DType::kFloat32, admit_all, HostCopyUse{}))
        .status();
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("model '", config.name(), "': loading ", path, " threw: ", ConciseTorchMessage(e.what())));
  }
}

absl::StatusOr<size_t> ModelManager::Unload(const LoadRequest& request) {
  absl::StatusOr<std::shared_ptr<const ModelEntry>> entry = repository_.Find(request.model);
  // A model whose files are gone or broken may still be resident.
  if (!entry.ok() && !absl::IsFailedPrecondition(entry.status()) && !absl::IsNotFound(entry.status())) {
    return entry.status();
  }
  std::optional<int64_t> version;
  if (!request.version.empty()) {
    ASSIGN_OR_RETURN(version, ParseVersion(request.version, "version"));
  }
  std::optional<DeviceRequest> device;
  if (!request.device.empty()) {
    ASSIGN_OR_RETURN(DeviceRequest d, ParseDeviceRequest(request.device));
    if (!d.automatic) device = d;
  }
  std::optional<DType> dtype = PrecisionDType(request.precision);
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

absl::Status ModelManager::WarmUp(const Route& route) {
  absl::StatusOr<ModelCache::Lease> model = Acquire(route);
  if (!model.ok()) return model.status();
  const InputSignature& sig = (*model)->signature();
  // The config's warm-up samples (Triton's model_warmup), each `count`
  // times; without them, one run on zeros where the shapes are known.
  std::vector<std::pair<std::vector<at::Tensor>, uint32_t>> runs;
  const v1::ModelConfig& config = route.model->config;
  for (int i = 0; i < config.warmup_samples_size(); ++i) {
    absl::StatusOr<WarmupTensors> sample =
        MakeWarmupTensors(sig, config.warmup_samples(i), i, route.model->dir, warmup_limits_);
    if (!sample.ok()) {
      return absl::Status(sample.status().code(),
                          absl::StrCat("warm-up of model '", route.model->name, "': ", sample.status().message()));
    }
    runs.emplace_back(std::move(sample->tensors), std::max<uint32_t>(1, config.warmup_samples(i).count()));
  }
  if (!runs.empty()) return RunWarmUp(route, std::move(*model), runs);
  std::vector<at::Tensor> zeros;
  for (const InputSpec& spec : sig.inputs) {
    if (!spec.dims || !spec.dtype) return absl::OkStatus();  // shapes unknown: loaded, not run
    // Strings: no value is right for every model (an empty one may be
    // refused, a number parsed); loaded, not run.
    if (*spec.dtype == DType::kBytes) return absl::OkStatus();
    std::vector<int64_t> shape;
    if (sig.max_batch_size > 0) shape.push_back(1);
    for (int64_t d : *spec.dims) shape.push_back(d == -1 ? 1 : d);
    try {
      zeros.push_back(at::zeros(shape, at::TensorOptions().dtype(ToScalarType(*spec.dtype))));
    } catch (const std::exception& e) {
      return absl::ResourceExhaustedError(absl::StrCat("warm-up of model '", route.model->name,
                                                       "': cannot allocate inputs: ", ConciseTorchMessage(e.what())));
    }
  }
  runs.emplace_back(std::move(zeros), 1);
  return RunWarmUp(route, std::move(*model), runs);
}

absl::Status ModelManager::RunWarmUp(const Route& route, ModelCache::Lease model,
                                     const std::vector<std::pair<std::vector<at::Tensor>, uint32_t>>& runs) {
  Clock::time_point start = Clock::now();
  uint64_t activation_bytes = 0;
  {
    ActivationMeter meter;
    for (size_t i = 0; i < runs.size(); ++i) {
      for (uint32_t n = 0; n < runs[i].second; ++n) {
        absl::StatusOr<std::vector<NamedTensor>> out = model->WarmUp(runs[i].first);
        if (out.ok()) continue;
        if (route.model->config.warmup_samples_size() == 0) return out.status();
        return absl::Status(out.status().code(),
                            absl::StrCat("warm-up sample ", i, " ('", route.model->config.warmup_samples(i).name(),
                                         "') of model '", route.model->name, "' failed: ", out.status().message()));
      }
    }
    activation_bytes = meter.peak_bytes();
  }
  LOG_INFO << "warm-up of model '" << route.model->name << "' on " << route.device.id.ToString() << " took "
           << MicrosBetween(start, Clock::now()) << " us; activation peak " << activation_bytes << " bytes";
  const ModelKey key = route.key();
  if (Listener::TimedRunSink timed = listener_.timed_run ? listener_.timed_run(key) : nullptr) {
    // Lazy initialisation was paid by the runs above: this one measures.
    const Clock::time_point began = Clock::now();
    const uint64_t cpu_began = ThreadCpuMicros();
    const std::vector<at::Tensor>& inputs = runs.back().first;
    if (model->WarmUp(inputs).ok()) {
      const int64_t rows = !inputs.empty() && inputs[0].dim() > 0 ? inputs[0].size(0) : 0;
      timed(MicrosBetween(began, Clock::now()), ThreadCpuMicros() - cpu_began, rows);
    }
  }
  model = ModelCache::Lease();  // idle again: making room for its activations may evict others, not it
  if (footprints_) {
    footprints_->RecordActivations(key.model, route.stamp.ContentKey(), key.device.kind, key.dtype, activation_bytes);
  }
  cache_.SetActivationBytes(key, activation_bytes);
  return absl::OkStatus();
}

size_t ModelManager::EvictIdleAfterOom(const DeviceId& device, const ModelKey& keep) {
  return cache_.EvictIdle(device, &keep, EvictionReason::kOom);
}

size_t ModelManager::DropModel(const std::string& model) {
  host_copies_.DropIf([&](const HostCopyKey& key) { return key.model == model; });
  return cache_.Unload([&](const ModelKey& key) { return key.model == model; });
}

void ModelManager::DropIfOutOfService(const Route& route) {
  // Unload and Remove publish the model out of service and then drop its
  // copies, so a copy that landed after their drop is seen here.
  std::shared_ptr<const ModelEntry> entry = repository_.Lookup(route.model->name);
  if (entry && !entry->removed && !entry->unloaded) return;
  const ModelKey key = route.key();
  const std::string content = HostCopyContent(route.stamp);
  host_copies_.DropIf([&](const HostCopyKey& copy) { return copy.model == key.model && copy.content == content; });
  if (cache_.Unload([&](const ModelKey& resident) { return resident == key; }) > 0) {
    LOG_INFO << "dropped " << key.ToString() << " again: it finished loading after its model was "
             << (entry && !entry->removed ? "unloaded" : "removed") << "; the requests that waited for it run on it";
  }
}

size_t ModelManager::DropVersions(const std::string& model, const std::vector<VersionCopies>& copies) {
  if (copies.empty()) return 0;
  return cache_.Unload([&](const ModelKey& key) {
    if (key.model != model) return false;
    return std::any_of(copies.begin(), copies.end(), [&](const VersionCopies& c) {
      return key.version == c.version && (c.generation == 0 || key.generation == c.generation) &&
             (!c.device || key.device == *c.device);
    });
  });
}

size_t ModelManager::DropUnserved() {
  // Host copies of files no READY version serves any more.
  host_copies_.DropIf([&](const HostCopyKey& key) {
    std::shared_ptr<const ModelEntry> entry = repository_.Lookup(key.model);
    if (!entry) return true;
    for (int64_t version : entry->versions) {
      const VersionStatus* s = entry->Status(version);
      if (s && s->state == VersionState::kReady && HostCopyContent(s->stamp) == key.content) return false;
    }
    return true;
  });
  return cache_.Unload([&](const ModelKey& key) {
    std::shared_ptr<const ModelEntry> entry = repository_.Lookup(key.model);
    const VersionStatus* s = entry ? entry->Status(key.version) : nullptr;
    return !s || s->state != VersionState::kReady || s->generation != key.generation;
  });
}

}  // namespace infergate
