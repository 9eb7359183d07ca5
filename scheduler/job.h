#pragma once
// One unit of queued device work: an inference request with its routing
// decision, or a plain task (an explicit model load).

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "devices/device_info.h"
#include "devices/device_registry.h"
#include "scheduler/inference_types.h"
#include "scheduler/model_repository.h"

namespace infergate {

class DeviceExecutor;

// Where and how a request runs.
struct Route {
  std::shared_ptr<const ModelEntry> model;
  int64_t version = 0;
  DeviceResolution resolution;  // the device plus any fallback already taken
  DeviceInfo device;
  DType dtype = DType::kFloat32;
};

struct Job {
  InferenceRequest request;
  Route route;
  Clock::time_point enqueued;
  // Jobs with the same non-empty key may run as one batch: same model,
  // version, device, dtype, input names and non-batch dims.
  std::string batch_key;
  int64_t rows = 1;
  uint32_t max_batch_rows = 0;
  uint64_t max_queue_delay_us = 0;
  std::vector<int64_t> preferred_batch_rows;  // from the config; usually empty
  // Set for non-inference work; runs alone.
  std::function<void()> task;
  std::atomic<bool> cancelled{false};
  bool routed = false;  // `route` is set
  DeviceExecutor* executor = nullptr;

  // Delivers the answer; only the first call counts.
  void Finish(absl::StatusOr<InferenceResult> result) {
    if (!finished_.exchange(true) && done_) done_(std::move(result), *this);
  }
  // The device label for metrics: where it ran or was headed; "" if unrouted.
  std::string DeviceLabel() const { return routed ? route.resolution.device.ToString() : ""; }
  bool finished() const { return finished_.load(); }
  void set_done(InferCallback done) { done_ = std::move(done); }

 private:
  InferCallback done_;
  std::atomic<bool> finished_{false};
};

}  // namespace infergate
