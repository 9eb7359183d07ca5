#include "scheduler/core/core_parts.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "devices/torch_probe.h"
#include "scheduler/core/request_dispatcher.h"
#include "scheduler/core/thread_sizing.h"

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
      planner(repository, devices, learned, options.router,
              [this](const ModelKey& key, RouteCandidate* c) {
                if (DeviceExecutor* ex = executors.Find(key.device)) {
                  c->queued = ex->queue_depth();
                  c->running = ex->in_flight();
                  c->workers = ex->workers();
                }
                // A copy in any dtype is ready: the accuracy contract picks
                // the dtype once the device is chosen (unverified: FP32).
                c->resident = models.IsResidentInAnyDType(key);
                c->latency_us = latency.Mean(key.model, key.device);
              },
              &checker),
      lifecycle(repository, models, devices),
      mover([this](const BackgroundMover::Wanted& wanted) { return MoveInBackground(wanted); }),
      executors(
          devices.Snapshot(), options, [this](DeviceExecutor::Batch& batch) { dispatcher->RunQueued(batch); },
          [this](const DeviceId& device, const Job& job, RejectionReason reason) {
            observer->OnRejected(device, job.model_label, reason);
          }) {
  repository.SetConfigCheck([this](const v1::ModelConfig& config) { return TritonGpusPresent(config, devices); });
  if (options.background_moves) {
    planner.SetMoveWanted([this](const std::string& model, int64_t version, const DeviceId& device, Precision precision) {
      mover.Want({model, version, device, precision});
    });
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
    uint64_t bytes = budget != options.cache_budgets.end()
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

absl::Status CoreParts::MoveInBackground(const BackgroundMover::Wanted& wanted) {
  if (draining.load()) return absl::UnavailableError("the server is draining");
  absl::StatusOr<Route> route = planner.Plan(
      {wanted.model, std::to_string(wanted.version), wanted.device.ToString(), wanted.precision, /*allow_fallback=*/false});
  if (!route.ok()) return route.status();
  if (models.IsResident(route->key())) return absl::OkStatus();  // a request loaded it meanwhile
  const Clock::time_point start = Clock::now();
  absl::StatusOr<ModelCache::Lease> lease = models.Acquire(*route);
  if (!lease.ok()) return lease.status();
  LOG_INFO << "model '" << wanted.model << "' version " << wanted.version << " moved to " << wanted.device.ToString()
           << " in the background in " << MicrosBetween(start, Clock::now()) / 1000
           << " ms: auto sent its requests where it was resident meanwhile, and sends them there now";
  observer->OnModelMove(wanted.model, wanted.device, "demand");
  return absl::OkStatus();
}

}  // namespace infergate
