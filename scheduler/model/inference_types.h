#pragma once
// A request as the core sees it (already decoded by a front end), and what
// it hands back.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devices/dtype.h"
#include "devices/precision.h"
#include "scheduler/model/tensor_types.h"

namespace infergate {

using Clock = std::chrono::steady_clock;

class RequestTrace;  // request_trace.h

struct InferenceRequest {
  std::string model;
  std::string version;  // "" = latest
  std::string device;   // as the client sent it
  Precision precision = Precision::kAuto;
  bool allow_fallback = true;
  // CPU tensors. They may alias the client's request bytes, so they must
  // not be read after the callback has run.
  std::vector<NamedTensor> inputs;
  Clock::time_point received = Clock::now();
  Clock::time_point deadline = Clock::time_point::max();
  // Priority level, 1 the highest; 0 takes the model's default. Checked
  // against the model's priority_levels.
  uint32_t priority = 0;
  // Longest the request may wait in a device queue, in microseconds; 0
  // takes the model's default. Shortens the model's queue timeout, and may
  // lengthen it only where the config has allow_timeout_override.
  uint64_t timeout_us = 0;
  // Set when the call is traced: the core notes each step of the request
  // here (request_trace.h). Null when tracing is off or the call is not
  // sampled.
  std::shared_ptr<RequestTrace> trace;
};

struct Placement {
  std::string device;
  std::string requested_device;
  DType dtype = DType::kFloat32;
  bool fell_back = false;
  std::string fallback_reason;  // "kind:detail", e.g. "unsupported_op:aten::max_pool2d"
  // Why the dtype is not the one asked for or the device's default, e.g.
  // "inaccurate:bfloat16 (error ...)"; empty when it is.
  std::string precision_reason;
  uint32_t batch_size = 1;
  int64_t model_version = 0;
  // Under auto with an accelerator: the ready path the request took
  // (scheduler/routing/ready_path.h: "ideal", "resident", "load_and_run",
  // "cold_start") and that path's estimate of its time in the server, in
  // microseconds; empty and 0 otherwise.
  std::string ready_path;
  double ready_path_expected_us = 0;
  double ready_path_load_us = 0;  // the load's part of it (load_and_run, cold_start)
};

// Where an accuracy check of one model version in one reduced dtype on one
// device stands (precision_checker.h), for listings.
struct PrecisionReport {
  int64_t version = 0;
  std::string device;  // "cuda:0"
  DType dtype = DType::kFloat16;
  std::string state;          // verified, inaccurate, checking, not_checked
  double relative_error = 0;  // worst error / largest |FP32 output|
  std::string detail;         // the verdict's words, or why it was not checked
};

struct Timing {
  uint64_t queue_us = 0;
  uint64_t compute_us = 0;  // joining the batch and running the model
  uint64_t total_us = 0;
  uint64_t load_wait_us = 0;  // held for its model's load on arrival (part of queue_us)
  // The batch's time, finer: joining inputs, running, splitting outputs.
  uint64_t compute_input_ns = 0;
  uint64_t compute_infer_ns = 0;
  uint64_t compute_output_ns = 0;
};

struct ClassLabels;  // class_labels.h

struct InferenceResult {
  std::vector<NamedTensor> outputs;  // CPU, contiguous
  Placement placement;
  Timing timing;
  // For classification answers: whether the outputs' first dimension is
  // the batch (the model's max_batch_size > 0), and the model's class
  // labels (null: none).
  bool batched = false;
  std::shared_ptr<const ClassLabels> labels;
};

// Bounded labels for metrics about a finished request, also on errors.
struct RequestLabels {
  std::string model;   // a repository model's name; "" when the request named no known model
  std::string device;  // where it ran or was headed; "" when it was never routed
};

// Receives the answer, exactly once per submitted request.
using InferCallback = std::function<void(absl::StatusOr<InferenceResult>, const RequestLabels&)>;

struct ConfigOverride;  // config_override.h

struct LoadRequest {
  std::string model;
  std::string version;
  std::string device;
  Precision precision = Precision::kAuto;
  // Loads only: laid over the repository's config for as long as this load
  // stands (null: the repository's config alone).
  std::shared_ptr<const ConfigOverride> config_override;
  // Loads only: the model's files sent with the load, by path inside the
  // model's folder ("1/model.pt"), served instead of the repository's
  // folder until the next explicit load (null: from the repository).
  std::shared_ptr<const std::map<std::string, std::string>> files;
  // Loads only: a model folder outside the repository (ModelMesh's
  // modelPath), served in place under `model` until the model is forgotten
  // or loaded again; its config's own name is replaced by `model`.
  std::string folder;
};

struct LoadResult {
  int64_t version = 0;
  std::string device;
  DType dtype = DType::kFloat32;
  uint64_t load_us = 0;
};

inline uint64_t MicrosBetween(Clock::time_point a, Clock::time_point b) {
  return b > a ? std::chrono::duration_cast<std::chrono::microseconds>(b - a).count() : 0;
}
inline uint64_t NanosBetween(Clock::time_point a, Clock::time_point b) {
  return b > a ? std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count() : 0;
}

}  // namespace infergate
