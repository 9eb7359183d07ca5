#pragma once
// Events the scheduler reports for metrics and logs; the default ignores them.
// Calls come from worker and gRPC threads and must not block.

#include <string>

#include "devices/device_id.h"
#include "scheduler/model/event_reasons.h"

namespace infergate {

class SchedulerObserver {
 public:
  virtual ~SchedulerObserver() = default;
  virtual void OnCacheLookup(const DeviceId& /*device*/, bool /*hit*/) {}
  virtual void OnModelLoad(const std::string& /*model*/, const DeviceId& /*device*/, double /*seconds*/, bool /*ok*/) {}
  // A load moved `bytes` of weights onto an accelerator in `seconds`
  // (measured, or a simulated device's charged cost).
  virtual void OnModelTransfer(const std::string& /*model*/, const DeviceId& /*device*/, uint64_t /*bytes*/,
                               double /*seconds*/) {}
  // `model` was loaded on `device` off the request path, for `reason`
  // ("demand": auto would serve it sooner there).
  virtual void OnModelMove(const std::string& /*model*/, const DeviceId& /*device*/, const std::string& /*reason*/) {}
  // `requests` waited for their model to load (or finish loading) on
  // `device` before they ran.
  virtual void OnWaitedForLoad(const DeviceId& /*device*/, size_t /*requests*/) {}
  // The repository changed one model version.
  virtual void OnModelUpdate(const std::string& /*model*/, ModelUpdateResult /*result*/) {}
  virtual void OnEviction(const DeviceId& /*device*/, EvictionReason /*why*/) {}
  // A request `auto` sent down a ready path (ReadyPathName) answered on
  // `device`; `regret` when it finished more than 20% after that path's
  // estimate (IsRegret).
  // `estimated`: the path had an estimate (the model's latency measured
  // there, or on another device to guess it from); regret is judged only
  // then.
  virtual void OnReadyPathAnswered(const std::string& /*path*/, const std::string& /*device*/, bool /*estimated*/,
                                   bool /*regret*/) {}
  // reason: device_unavailable, device_not_allowed, unsupported_op, dtype, oom
  virtual void OnFallback(const std::string& /*from*/, const std::string& /*to*/, const std::string& /*reason*/) {}
  // A request answered without running. `model` is "" when not yet known;
  // `device` is the CPU's for a refusal made before any device was chosen
  // (the core's own drain switch).
  virtual void OnRejected(const DeviceId& /*device*/, const std::string& /*model*/, RejectionReason /*reason*/) {}
  // An accuracy check of a model in a reduced dtype ("float16") on a
  // device ended.
  virtual void OnPrecisionCheck(const std::string& /*model*/, const std::string& /*device*/,
                                const std::string& /*dtype*/, PrecisionCheckKind /*kind*/,
                                PrecisionCheckResult /*result*/) {}
  // The largest error relative to the FP32 output's magnitude that a check
  // measured (or the state file kept) for that combination.
  virtual void OnPrecisionError(const std::string& /*model*/, const std::string& /*device*/,
                                const std::string& /*dtype*/, double /*relative_error*/) {}
};

}  // namespace infergate
