#include "scheduler/execution/request_trace.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace infergate {

RequestTrace::RequestTrace(TraceSpanRef self) : self_(self) {}

std::string RequestTrace::trace_id_hex() const {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(self_.trace_id.data()), self_.trace_id.size()));
}

void RequestTrace::Queued(absl::string_view device, absl::string_view fallback_reason, uint32_t priority,
                          Clock::time_point at) {
  MutexLock lock(mu_);
  Attempt& a = attempts_.emplace_back();
  a.device = std::string(device);
  a.fallback_reason = std::string(fallback_reason);
  a.priority = priority;
  a.enqueued = at;
}

void RequestTrace::Routed(absl::string_view ready_path, double expected_us, double load_expected_us) {
  MutexLock lock(mu_);
  if (attempts_.empty()) return;
  attempts_.back().ready_path = std::string(ready_path);
  attempts_.back().expected_us = expected_us;
  attempts_.back().load_expected_us = load_expected_us;
}

void RequestTrace::Released(Clock::time_point released) {
  MutexLock lock(mu_);
  if (attempts_.empty()) return;
  attempts_.back().held = true;
  attempts_.back().released = released;
}

void RequestTrace::Started(Clock::time_point dequeued, Clock::time_point model_ready, bool waited_for_load) {
  MutexLock lock(mu_);
  if (attempts_.empty()) return;
  Attempt& a = attempts_.back();
  a.started = true;
  a.dequeued = dequeued;
  a.model_ready = model_ready;
  a.waited_for_load = waited_for_load;
}

void RequestTrace::Ran(Clock::time_point inputs_joined, Clock::time_point computed, Clock::time_point outputs_split,
                       uint32_t batch_rows, std::vector<TraceSpanRef> companions, absl::string_view dtype) {
  MutexLock lock(mu_);
  if (attempts_.empty()) return;
  Attempt& a = attempts_.back();
  a.ran = true;
  a.inputs_joined = inputs_joined;
  a.computed = computed;
  a.outputs_split = outputs_split;
  a.batch_rows = batch_rows;
  a.batch_requests = static_cast<uint32_t>(companions.size() + 1);
  a.companions = std::move(companions);
  a.dtype = std::string(dtype);
}

void RequestTrace::Failed(absl::string_view stage, absl::string_view message) {
  MutexLock lock(mu_);
  if (attempts_.empty()) return;
  attempts_.back().failure = absl::StrCat(stage, ": ", message);
}

std::vector<RequestTrace::Attempt> RequestTrace::Attempts() const {
  MutexLock lock(mu_);
  return attempts_;
}

std::string TraceIdSuffix(const InferenceRequest& request) {
  if (!request.trace) return "";
  return absl::StrCat(" trace_id=", request.trace->trace_id_hex());
}

}  // namespace infergate
