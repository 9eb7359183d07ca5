#pragma once
// What the core notes about one sampled request on its way through queues
// and devices, for the front end to turn into trace spans when the call
// ends (service/tracing/call_trace.h). Plain data and clock readings: the core
// knows no tracing library, and a request without a RequestTrace (tracing
// off, or not sampled) costs the core one null check per step.
//
// A request moves through one or more attempts: queued on a device, taken
// by a worker, maybe waiting for its model to load, joined into a batch,
// run, its outputs split; a failure may end an attempt and a fallback
// start the next one on the CPU.
//
// Threading: the steps are noted by the threads the request passes through
// (the submitter, device workers, a canceller), one at a time in practice;
// every method takes the record's own lock all the same, so a cancel racing
// a worker cannot tear it. Attempts() is read when the call has ended.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"
#include "scheduler/model/inference_types.h"

namespace infergate {

// The identity of one request's server span, as W3C trace context carries
// it, so batch companions can point at each other.
struct TraceSpanRef {
  std::array<uint8_t, 16> trace_id{};
  std::array<uint8_t, 8> span_id{};
  bool sampled = false;
};

class RequestTrace {
 public:
  struct Attempt {
    std::string device;           // "cpu", "mps", "cuda:0"
    std::string fallback_reason;  // why the request came to this device instead of the one asked for; "" if it did not
    // The ready path `auto` chose (scheduler/routing/ready_path.h) and its
    // estimate of when the request finishes, in microseconds from its
    // planning; "" and 0 when it was not chosen that way.
    std::string ready_path;
    double expected_us = 0;
    double load_expected_us = 0;  // the load's part of expected_us (0: none)
    uint32_t priority = 0;
    Clock::time_point enqueued;
    // Load on arrival: held from `enqueued` while its model loaded, and
    // queued at `released` (arrival_loads.h).
    bool held = false;
    Clock::time_point released;
    // Taken off the queue by a worker, and when the model was ready to run
    // (after a load, or at once when it was resident).
    Clock::time_point dequeued;
    Clock::time_point model_ready;
    bool started = false;
    bool waited_for_load = false;
    // The batch: joining its inputs starts at model_ready; then the forward
    // pass; then splitting the outputs per request.
    bool ran = false;
    Clock::time_point inputs_joined;
    Clock::time_point computed;
    Clock::time_point outputs_split;
    uint32_t batch_rows = 0;
    uint32_t batch_requests = 0;
    std::vector<TraceSpanRef> companions;  // the batch's other sampled requests
    std::string dtype;
    // How the attempt failed ("running: ..."), when it did.
    std::string failure;
  };

  // `self`: the request's server span.
  explicit RequestTrace(TraceSpanRef self);

  const TraceSpanRef& self() const { return self_; }
  // The trace id as 32 lower-case hex digits, for log lines.
  std::string trace_id_hex() const;

  // A new attempt: queued on `device` at `at`.
  void Queued(absl::string_view device, absl::string_view fallback_reason, uint32_t priority, Clock::time_point at);
  // The current attempt's ready path and its estimate (Attempt::ready_path).
  void Routed(absl::string_view ready_path, double expected_us, double load_expected_us);
  // The current attempt was held for its model's load on arrival until
  // `released`, when it was queued.
  void Released(Clock::time_point released);
  // The current attempt was taken by a worker at `dequeued`; its model was
  // ready at `model_ready`.
  void Started(Clock::time_point dequeued, Clock::time_point model_ready, bool waited_for_load);
  // The current attempt's batch ran.
  void Ran(Clock::time_point inputs_joined, Clock::time_point computed, Clock::time_point outputs_split,
           uint32_t batch_rows, std::vector<TraceSpanRef> companions, absl::string_view dtype);
  // The current attempt failed while `stage` ("loading", "running").
  void Failed(absl::string_view stage, absl::string_view message);

  std::vector<Attempt> Attempts() const;

 private:
  const TraceSpanRef self_;
  mutable Mutex mu_;
  std::vector<Attempt> attempts_ ABSL_GUARDED_BY(mu_);
};

// " trace_id=<hex>" for a log line about `request`, or "" when untraced.
std::string TraceIdSuffix(const InferenceRequest& request);

}  // namespace infergate
