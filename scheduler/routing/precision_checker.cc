#include "scheduler/routing/precision_checker.h"

#include <ATen/ATen.h>

#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/file_digest.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "devices/device_failure.h"
#include "devices/system_info.h"
#include "scheduler/execution/batch_execution.h"
#include "scheduler/model/check_inputs.h"
#include "scheduler/repository/input_signature.h"
#include "scheduler/routing/output_comparison.h"

namespace infergate {
namespace {

bool Reduced(DType dtype) { return dtype == DType::kFloat16 || dtype == DType::kBFloat16; }

// Deep copies: a request's tensors may point into its wire buffer, which
// is freed once the answer goes out.
std::vector<NamedTensor> Cloned(const std::vector<NamedTensor>& tensors) {
  std::vector<NamedTensor> out;
  out.reserve(tensors.size());
  for (const NamedTensor& t : tensors) out.push_back({t.name, t.tensor.clone()});
  return out;
}

std::string Lower(absl::string_view text) { return absl::AsciiStrToLower(text); }

}  // namespace

PrecisionChecker::PrecisionChecker(ModelManager& models, ModelRepository& repository, const DeviceRegistry& devices,
                                   AccuracyLedger& ledger, Options options, CpuIdle cpu_idle)
    : models_(models),
      repository_(repository),
      devices_(devices),
      ledger_(ledger),
      options_(options),
      cpu_idle_(std::move(cpu_idle)) {}

PrecisionChecker::~PrecisionChecker() { Stop(); }

void PrecisionChecker::Start() {
  WriterLock lock(mu_);
  if (!options_.enabled || thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] {
    NameThisThread("precision check");
    Loop();
  });
}

void PrecisionChecker::Stop() {
  {
    WriterLock lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

PrecisionChecker::Key PrecisionChecker::KeyOf(const Route& route, DType dtype) {
  return {route.model->name, route.version, route.generation, route.device.id, dtype};
}

PrecisionChecker::KeyView PrecisionChecker::ViewOf(const Route& route, DType dtype) {
  return {route.model->name, route.version, route.generation, route.device.id, dtype};
}

AccuracyState PrecisionChecker::State(const Route& route, DType dtype, AccuracyVerdict* verdict) const {
  if (!options_.enabled) return AccuracyState::kVerified;
  ReaderLock lock(mu_);
  auto it = entries_.find(ViewOf(route, dtype));
  if (it == entries_.end() || it->second.stage != Stage::kDone) return AccuracyState::kUnchecked;
  if (verdict) *verdict = it->second.verdict;
  return it->second.verdict.passed ? AccuracyState::kVerified : AccuracyState::kInaccurate;
}

void PrecisionChecker::Request(const Route& route, DType dtype, const std::vector<NamedTensor>* request_inputs) {
  if (!options_.enabled || !Reduced(dtype)) return;
  const Clock::time_point now = Clock::now();
  auto settled = [&](const Entry& e) { return e.stage != Stage::kNotChecked || now < e.retry_after; };
  {
    ReaderLock lock(mu_);
    auto it = entries_.find(ViewOf(route, dtype));
    if (it != entries_.end() && settled(it->second)) return;  // checked, queued, or not yet due again
  }
  const Key key = KeyOf(route, dtype);
  const bool needs_request_inputs = NeedsRequestInputs(*route.model);
  if (needs_request_inputs && !request_inputs) return;  // a request will bring inputs
  {
    WriterLock lock(mu_);
    if (stopping_ || queue_.size() >= options_.max_queued) return;
    auto it = entries_.find(key);
    if (it != entries_.end() && settled(it->second)) return;
    entries_[key] = Entry{};
  }
  Task task;
  task.route = route;
  task.dtype = dtype;
  if (needs_request_inputs) task.inputs = Cloned(*request_inputs);
  {
    WriterLock lock(mu_);
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
}

bool PrecisionChecker::NeedsRequestInputs(const ModelEntry& model) {
  if (!model.config.accuracy().sample_inputs().empty() || UsesWarmupSample(model.config)) return false;
  if (model.declared.inputs.empty()) return true;
  for (const InputSpec& spec : model.declared.inputs) {
    if (!spec.dtype || !spec.dims) return true;
  }
  return false;
}

AccuracyState PrecisionChecker::CheckNow(const Route& route, DType dtype, const char* occasion) {
  if (!options_.enabled || !Reduced(dtype)) return AccuracyState::kVerified;
  if (NeedsRequestInputs(*route.model)) return State(route, dtype);
  const Key key = KeyOf(route, dtype);
  bool done = false;
  {
    WriterLock lock(mu_);
    auto it = entries_.find(key);
    done = it != entries_.end() && it->second.stage == Stage::kDone;
  }
  if (!done) Finish(key, route, Check(route, dtype, {}), occasion);
  return State(route, dtype);
}

void PrecisionChecker::Loop() {
  for (;;) {
    Task task;
    {
      WriterLock lock(mu_);
      // condition_variable_any unlocks and relocks mu_ itself.
      wake_.wait(mu_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      if (task.running_check) running_check_queued_ = false;
    }
    if (task.running_check) {
      RunningCheck(task);
    } else {
      Finish(KeyOf(task.route, task.dtype), task.route, Check(task.route, task.dtype, task.inputs), "check");
    }
  }
}

absl::StatusOr<std::string> PrecisionChecker::DigestOf(const Route& route) {
  const std::string path = repository_.ModelFile(*route.model, route.version);
  const std::string cache_key = absl::StrCat(path, "|", route.stamp.ContentKey());
  {
    MutexLock lock(digests_mu_);
    if (auto it = digests_.find(cache_key); it != digests_.end()) return it->second;
  }
  absl::StatusOr<std::string> digest = Sha256OfFile(path, "model file");
  if (!digest.ok()) return digest;
  MutexLock lock(digests_mu_);
  digests_[cache_key] = *digest;
  return digest;
}

std::string PrecisionChecker::DeviceSignature(const DeviceInfo& device) {
  // Simulated devices and the CPU compute with the CPU's kernels.
  if (device.simulated || device.id.kind == DeviceKind::kCpu) {
    static const std::string isa = CpuInstructionSet();
    return absl::StrCat("cpu:", isa);
  }
  if (device.id.kind == DeviceKind::kCuda) {
    return absl::StrCat(device.name, " sm", device.compute_capability, device.backend_detail);
  }
  return absl::StrCat("macos", device.precision.macos_major);
}

std::optional<Route> PrecisionChecker::ReferenceRoute(const Route& route) const {
  std::optional<DeviceInfo> cpu = devices_.Find(kCpuDevice);
  if (!cpu) return std::nullopt;
  Route reference = route;
  reference.device = *std::move(cpu);
  reference.dtype = DType::kFloat32;
  reference.fallback.reset();
  return reference;
}

absl::StatusOr<std::vector<NamedTensor>> PrecisionChecker::RunOn(const Route& route,
                                                                 const std::vector<NamedTensor>& inputs) {
  ASSIGN_OR_RETURN(ModelCache::Lease lease, models_.Acquire(route));
  std::vector<TensorMeta> metas = TensorMetas(inputs);
  ASSIGN_OR_RETURN(std::vector<size_t> order, MatchInputs(lease->signature(), metas, route.model->name));
  std::vector<at::Tensor> ordered;
  ordered.reserve(order.size());
  for (size_t i : order) ordered.push_back(inputs[i].tensor);
  return lease->Run(ordered);
}

PrecisionChecker::Entry PrecisionChecker::Check(const Route& route, DType dtype,
                                                const std::vector<NamedTensor>& captured) {
  Entry entry;
  entry.stage = Stage::kNotChecked;
  const ModelEntry& model = *route.model;
  absl::StatusOr<std::string> digest = DigestOf(route);
  if (!digest.ok()) {
    entry.note = std::string(digest.status().message());
    return entry;
  }
  const std::string version_dir = (std::filesystem::path(model.dir) / std::to_string(route.version)).string();
  absl::StatusOr<CheckInputs> made = MakeCheckInputs(model.declared, model.config, {version_dir, model.dir});
  std::vector<NamedTensor> inputs;
  std::string fingerprint;
  if (made.ok()) {
    for (size_t i = 0; i < made->tensors.size(); ++i) {
      std::string name = i < model.declared.inputs.size() ? model.declared.inputs[i].name : "";
      inputs.push_back({std::move(name), std::move(made->tensors[i])});
    }
    fingerprint = made->fingerprint;
  } else if (absl::IsFailedPrecondition(made.status()) && !captured.empty()) {
    inputs = captured;
    fingerprint = "request";
  } else {
    entry.note = std::string(made.status().message());
    return entry;
  }

  AccuracyKey ledger_key{model.name, *digest, route.device.id.kind, DeviceSignature(route.device), dtype, fingerprint};
  if (std::optional<AccuracyMeasurement> known = ledger_.Find(ledger_key)) {
    entry.stage = Stage::kDone;
    entry.measurement = *std::move(known);
    entry.ledger_key = std::move(ledger_key);
    entry.from_ledger = true;
    return entry;
  }
  std::optional<Route> reference = ReferenceRoute(route);
  if (!reference) {
    entry.note = "no cpu device for the FP32 reference";
    return entry;
  }
  Route candidate = route;
  candidate.dtype = dtype;
  absl::StatusOr<std::vector<NamedTensor>> expected = RunOn(*reference, inputs);
  if (!expected.ok()) {
    entry.note = absl::StrCat("the FP32 reference run on the cpu failed: ", expected.status().message());
    return entry;
  }
  absl::StatusOr<std::vector<NamedTensor>> got = RunOn(candidate, inputs);
  if (!got.ok()) {
    // The device failing (out of memory, an op it lacks, a lost device) is
    // the failure policy's business, not a finding about accuracy.
    if (DeviceFailureOf(got.status()) || absl::IsResourceExhausted(got.status()) || absl::IsUnavailable(got.status())) {
      entry.note = absl::StrCat("the ", Lower(DTypeName(dtype)), " run failed: ", got.status().message());
      return entry;
    }
    entry.measurement.problem =
        absl::StrCat("the model fails in ", Lower(DTypeName(dtype)), ": ", got.status().message());
  } else {
    entry.measurement = CompareOutputs(*expected, *got);
  }
  ledger_.Record(ledger_key, entry.measurement);
  entry.stage = Stage::kDone;
  entry.ledger_key = std::move(ledger_key);
  return entry;
}

void PrecisionChecker::Finish(const Key& key, const Route& route, Entry entry, const char* how) {
  const std::string device = route.device.id.ToString();
  const std::string dtype = Lower(DTypeName(key.dtype));
  const std::string where =
      absl::StrCat("model '", key.model, "' version ", key.version, " on ", device, " in ", dtype);
  const bool from_state_file = entry.from_ledger;
  PrecisionCheckResult result = PrecisionCheckResult::kSkipped;
  double relative_error = 0;
  if (entry.stage == Stage::kDone) {
    entry.verdict = Judge(entry.measurement, route.model->config.accuracy(), key.dtype);
    const AccuracyVerdict& verdict = entry.verdict;
    relative_error = verdict.relative_error;
    result = verdict.passed ? PrecisionCheckResult::kPassed : PrecisionCheckResult::kFailed;
    if (!verdict.passed) {
      LOG_WARNING << where << ": refused by the accuracy check (" << how
                  << (from_state_file ? ", from the state file" : "") << "): " << verdict.Describe()
                  << "; requests get the nearest verified dtype instead";
    } else {
      LOG_INFO << where << ": verified by the accuracy check (" << how
               << (from_state_file ? ", from the state file" : "") << "): " << verdict.Describe();
    }
  } else {
    LOG_WARNING << where << ": not checked (" << entry.note << "); requests get a verified dtype, and one asks "
                << "again in " << kRetryNotChecked.count() << " s";
    entry.retry_after = Clock::now() + kRetryNotChecked;
  }
  // Counted before the verdict is published, so whoever sees it finds it counted.
  if (observer_) {
    if (!from_state_file) observer_->OnPrecisionCheck(key.model, device, dtype, PrecisionCheckKind::kCheck, result);
    if (result != PrecisionCheckResult::kSkipped) observer_->OnPrecisionError(key.model, device, dtype, relative_error);
  }
  WriterLock lock(mu_);
  entries_[key] = std::move(entry);
}

bool PrecisionChecker::WantsRunningCheck(const Route& route) {
  const uint32_t every = route.model->config.accuracy().running_check_every();
  if (every == 0 || !options_.enabled || !Reduced(route.dtype)) return false;
  WriterLock lock(mu_);
  return ++served_[route.model->name] % every == 0;
}

void PrecisionChecker::OfferRunningCheck(const Route& route, const std::vector<NamedTensor>& inputs,
                                         std::vector<NamedTensor> outputs) {
  const std::string dtype = Lower(DTypeName(route.dtype));
  bool queued = false;
  if (cpu_idle_ && cpu_idle_()) {
    WriterLock lock(mu_);
    if (!stopping_ && !running_check_queued_) {
      running_check_queued_ = true;
      queued = true;
    }
  }
  if (!queued) {
    if (observer_)
      observer_->OnPrecisionCheck(route.model->name, route.device.id.ToString(), dtype, PrecisionCheckKind::kRunning,
                                  PrecisionCheckResult::kDropped);
    return;
  }
  Task task;
  task.route = route;
  task.dtype = route.dtype;
  task.inputs = Cloned(inputs);
  task.outputs = std::move(outputs);
  task.running_check = true;
  {
    WriterLock lock(mu_);
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void PrecisionChecker::RunningCheck(const Task& task) {
  const Route& route = task.route;
  const std::string device = route.device.id.ToString();
  const std::string dtype = Lower(DTypeName(task.dtype));
  std::optional<Route> reference = ReferenceRoute(route);
  if (!reference || (cpu_idle_ && !cpu_idle_())) {
    if (observer_) {
      observer_->OnPrecisionCheck(route.model->name, device, dtype, PrecisionCheckKind::kRunning,
                                  PrecisionCheckResult::kDropped);
    }
    return;
  }
  absl::StatusOr<std::vector<NamedTensor>> expected = RunOn(*reference, task.inputs);
  if (!expected.ok()) {
    if (observer_) {
      observer_->OnPrecisionCheck(route.model->name, device, dtype, PrecisionCheckKind::kRunning,
                                  PrecisionCheckResult::kSkipped);
    }
    return;
  }
  AccuracyMeasurement measured = CompareOutputs(*expected, task.outputs);
  const v1::AccuracyConfig& accuracy = route.model->config.accuracy();
  AccuracyVerdict verdict = Judge(measured, accuracy, task.dtype);
  // Counted before the verdict is published, so whoever sees the dtype
  // marked inaccurate also finds the failed check counted.
  if (observer_) {
    observer_->OnPrecisionCheck(route.model->name, device, dtype, PrecisionCheckKind::kRunning,
                                verdict.passed ? PrecisionCheckResult::kPassed : PrecisionCheckResult::kFailed);
    if (!verdict.passed) observer_->OnPrecisionError(route.model->name, device, dtype, verdict.relative_error);
  }
  const Key key = KeyOf(route, task.dtype);
  std::optional<AccuracyKey> ledger_key;
  AccuracyMeasurement kept = measured;
  {
    WriterLock lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second.stage == Stage::kDone) {
      kept = Worse(it->second.measurement, measured, accuracy, task.dtype);
      ledger_key = it->second.ledger_key;
      if (!verdict.passed) {
        it->second.measurement = kept;
        it->second.verdict = Judge(kept, accuracy, task.dtype);
      }
    } else if (!verdict.passed) {
      Entry entry;
      entry.stage = Stage::kDone;
      entry.measurement = kept;
      entry.verdict = verdict;
      entries_[key] = std::move(entry);
    }
  }
  if (!verdict.passed) {
    if (ledger_key) ledger_.Record(*ledger_key, kept);
    LOG_WARNING << "model '" << route.model->name << "' version " << route.version << " on " << device << " in "
                << dtype << ": the running check found drift beyond tolerance on a served request ("
                << verdict.Describe() << "); marked inaccurate, requests get the nearest verified dtype";
  }
}

std::vector<PrecisionReport> PrecisionChecker::Reports(const std::string& model) const {
  absl::StatusOr<std::shared_ptr<const ModelEntry>> entry = repository_.Find(model);
  if (!entry.ok()) return {};
  std::vector<PrecisionReport> out;
  WriterLock lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const Key& key = it->first;
    if (key.model != model) continue;
    const VersionStatus* status = (*entry)->Status(key.version);
    if (!status || status->generation != key.generation) continue;  // an older file
    PrecisionReport r;
    r.version = key.version;
    r.device = key.device.ToString();
    r.dtype = key.dtype;
    switch (it->second.stage) {
      case Stage::kQueued: r.state = "checking"; break;
      case Stage::kNotChecked:
        r.state = "not_checked";
        r.detail = it->second.note;
        break;
      case Stage::kDone: {
        AccuracyVerdict verdict = Judge(it->second.measurement, (*entry)->config.accuracy(), key.dtype);
        r.state = verdict.passed ? "verified" : "inaccurate";
        r.relative_error = verdict.relative_error;
        r.detail = verdict.Describe();
        break;
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace infergate
