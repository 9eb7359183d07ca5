#pragma once
// The trace of one inference call (infer_call.h): its server span, started
// when the call begins with the caller's W3C trace context as its parent,
// and, when the call ends, the child spans built from what the call path
// and the core noted on the way:
//
//   <rpc or route>                   SERVER: rpc.* or http.*, infergate.*
//   ├─ infergate.admission           token, drain switch, byte budget
//   ├─ infergate.decode              the wire form into tensors
//   ├─ infergate.attempt             one per device tried (device, dtype,
//   │  │                             fallback reason, failure)
//   │  ├─ infergate.queue            waiting in the device's queue
//   │  ├─ infergate.model_load       only when the model was not resident
//   │  ├─ infergate.batch            joining the batch's inputs; links to
//   │  │                             the batch's other requests
//   │  ├─ infergate.compute          the forward pass
//   │  └─ infergate.outputs          splitting the outputs per request
//   └─ infergate.encode              the answer into the wire form
//
// A fallback is also an event on the server span, with its reason. Spans
// are ended with the times noted (steady clock), so building them at the
// end costs the request's path nothing while it runs.
//
// Threading: the front end's thread starts the call and notes admission
// and decoding; whichever thread ends the call (a device worker, or the
// front end's) notes the encoding and ends it. These steps are ordered by
// the call itself, so no lock is taken here.

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "opentelemetry/nostd/shared_ptr.h"
#include "opentelemetry/trace/span.h"
#include "opentelemetry/trace/span_startoptions.h"
#include "opentelemetry/trace/tracer.h"
#include "scheduler/execution/request_trace.h"
#include "scheduler/model/inference_types.h"
#include "service/tracing/call_trace_start.h"

namespace infergate {

// The steady clock's reading and the wall clock's at one instant: spans
// carry wall-clock times, worked out from steady readings through one
// anchor per call, so a call's spans nest exactly.
struct ClockAnchor {
  Clock::time_point steady = Clock::now();
  std::chrono::system_clock::time_point system = std::chrono::system_clock::now();
  std::chrono::system_clock::time_point ToSystem(Clock::time_point t) const {
    return system + std::chrono::duration_cast<std::chrono::system_clock::duration>(t - steady);
  }
};

class CallTrace {
 public:
  // `anchor`: the one the server span's start was worked out with.
  CallTrace(opentelemetry::nostd::shared_ptr<opentelemetry::trace::Tracer> tracer,
            opentelemetry::nostd::shared_ptr<opentelemetry::trace::Span> server_span, const CallTraceStart& start,
            const ClockAnchor& anchor);
  CallTrace(const CallTrace&) = delete;
  CallTrace& operator=(const CallTrace&) = delete;
  ~CallTrace();

  // What the core notes into (shared with the request); null for a call
  // that is not sampled, which records nothing.
  const std::shared_ptr<RequestTrace>& record() const { return record_; }
  bool recording() const { return recording_; }
  // The trace id as 32 lower-case hex digits, for log lines (also for an
  // unsampled call, whose caller may have sent it).
  std::string trace_id_hex() const;

  // Admission decided at `at`: OK, or the refusal.
  void Admitted(Clock::time_point at, const absl::Status& outcome);
  // The decoded request goes to the core at `at`.
  void Submitted(const InferenceRequest& request, Clock::time_point at);
  // The answer was encoded between `start` and `end`.
  void Encoded(Clock::time_point start, Clock::time_point end);
  // The call ended with `status` (what the client gets); `result` when the
  // model ran and the answer went out.
  void End(const absl::Status& status, const InferenceResult* result, Clock::time_point at);

 private:
  // How a span under `parent` starting at `start` is started.
  opentelemetry::trace::StartSpanOptions ChildOptions(Clock::time_point start,
                                                      const opentelemetry::trace::SpanContext& parent) const;
  // A span under `parent` from `start`; EndAt ends it.
  opentelemetry::nostd::shared_ptr<opentelemetry::trace::Span> Child(const char* name, Clock::time_point start,
                                                                     const opentelemetry::trace::SpanContext& parent);
  void EndAt(opentelemetry::trace::Span& span, Clock::time_point end);
  void AddAttempts(Clock::time_point call_end);

  opentelemetry::nostd::shared_ptr<opentelemetry::trace::Tracer> tracer_;
  opentelemetry::nostd::shared_ptr<opentelemetry::trace::Span> server_;
  const CallTransport transport_;
  int (*const http_status_for_)(const absl::Status& status);
  const bool recording_;
  std::shared_ptr<RequestTrace> record_;
  const ClockAnchor anchor_;
  const Clock::time_point started_;
  Clock::time_point admitted_{};
  absl::Status admission_;
  Clock::time_point submitted_{};
  bool encoded_ = false;
  Clock::time_point encode_start_{}, encode_end_{};
  bool ended_ = false;
};

}  // namespace infergate
