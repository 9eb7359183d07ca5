#pragma once
// One inference call, whatever front end it came by: the single path that
// admits it (the caller's token, the drain switch, the in-flight byte
// budget), hands the decoded request to the core, encodes the answer
// through the front end, counts how it ended, and cancels it when the
// caller goes away. The front ends (v1 Infer, v2 ModelInfer, each request
// of a v2 ModelStreamInfer stream, REST infer) decode their wire form into
// an InferenceRequest and write their answer; nothing else.
//
//   auto call = InferCall::Begin(environment, model, finish);
//   call->Trace(start, header);                       // with tracing on
//   if (!call->Admit(authorization, bytes)) return;   // finished: refused
//   ... decode; on a bad request: return call->Refuse(status);
//   call->Submit(std::move(request), encode);         // finish runs once
//
// Every call ends in exactly one `finish`, with OK once `encode` wrote the
// answer, or the status the client is to get. Refusals and answers are
// reported to the front end's observer the same way for every front end,
// and traced the same way (call_trace.h).
//
// Threading and ownership: InferCall is shared; the transport keeps it
// until it is done with the call (the call holds the request's share of
// the in-flight budget until then). `finish` and `encode` run on the
// thread that refuses the call, on a device worker, or on the thread that
// submits it (an error found before queueing); never under the call's lock.
// Cancel may be called from any thread at any time, also before Submit.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"
#include "scheduler/model/inference_types.h"
#include "scheduler/model/request_handle.h"
#include "service/call/call_environment.h"
#include "service/call/inflight_budget.h"
#include "service/tracing/call_trace_start.h"

namespace infergate {

class CallTrace;  // call_trace.h

class InferCall : public std::enable_shared_from_this<InferCall> {
 public:
  using Finish = std::function<void(const absl::Status& status)>;
  // Writes the answer into the transport's response, and may take the
  // output tensors out of `result`; its error (an output the wire cannot
  // carry) is what the client gets instead.
  using Encode = std::function<absl::Status(InferenceResult& result)>;

  // `model` is the model the caller named, for the metric labels of a call
  // refused before it reached the core (counted under it only if it is a
  // repository model).
  static std::shared_ptr<InferCall> Begin(const CallEnvironment& environment, absl::string_view model, Finish finish);

  // Starts the call's trace when the front end traces (CallEnvironment::tracing):
  // `header` reads the caller's trace context (Tracing::StartCall). Call
  // before Admit; a no-op with tracing off.
  void Trace(const CallTraceStart& start, absl::FunctionRef<absl::string_view(absl::string_view name)> header);

  // The caller's token (`authorization` is asked for the "Bearer ..." value
  // only when tokens are configured), the drain switch, then room for the
  // request's `bytes` in the budget. False when refused: the call has
  // finished with UNAUTHENTICATED, UNAVAILABLE or RESOURCE_EXHAUSTED.
  bool Admit(absl::FunctionRef<absl::string_view()> authorization, uint64_t bytes);
  // The same for a request on a stream whose caller was checked when the
  // stream opened: the drain switch and the budget.
  bool AdmitOnStream(uint64_t bytes);
  // Admit for a request whose bytes were reserved before it was read (the
  // intake gate's room, shrunk to the message): the same checks, and
  // `held` becomes the call's share of the budget.
  bool AdmitHolding(absl::FunctionRef<absl::string_view()> authorization, InflightBudget::Reservation held);
  // Reserves `bytes` more, for memory the call holds for a while (a parse
  // tree); released with the reservation. The budget's refusal otherwise,
  // counted like one at admission (the call is not finished).
  absl::StatusOr<InflightBudget::Reservation> Reserve(uint64_t bytes);

  // Finishes a call that never reached the core with `status` (not OK).
  void Refuse(const absl::Status& status);

  // The answer will carry up to `k` classes per row of an output
  // (Triton's classification extension) instead of the output itself:
  // each is a record and text of its own, charged as such. Before Submit.
  void ExpectClasses(uint64_t k) { classes_per_row_ = std::max(classes_per_row_, k); }

  // Hands `request` to the core. `encode` runs once the model answered;
  // then `finish`. `request.received` is set to the call's start. What the
  // answer will hold while it is encoded and written (its outputs, their
  // strings and classes) is counted in the budget first, never refused:
  // it is computed already, and new requests wait while it is held.
  void Submit(InferenceRequest request, Encode encode);

  // The caller went away: a request not yet submitted is cancelled as soon
  // as it is; a queued one leaves its queue (finishing CANCELLED); one
  // running finishes and its answer is dropped by the transport.
  void Cancel();

  Clock::time_point received() const { return received_; }
  const CallEnvironment& environment() const { return environment_; }

  InferCall(const CallEnvironment& environment, absl::string_view model, Finish finish);  // use Begin
  ~InferCall();

 private:
  // Notes admission's outcome in the trace.
  void NoteAdmission(const absl::Status& outcome);
  // While draining: refuses the call (UNAVAILABLE, counted) and true.
  bool RefusedWhileDraining();
  // Reports the end and runs `finish_`; exactly once per call.
  void End(const RequestLabels& labels, const absl::Status& status, const InferenceResult* result);
  // The call's log lines: server faults (rate-limited) and, at debug level,
  // every call; with its trace id when traced.
  void LogEnd(const RequestLabels& labels, const absl::Status& status, Clock::time_point ended) const;

  const CallEnvironment& environment_;
  const std::string model_;
  const Finish finish_;
  const Clock::time_point received_;
  // Touched by the thread admitting the call, then by the one answering it.
  InflightBudget::Reservation reservation_;
  uint64_t classes_per_row_ = 0;  // set before Submit
  // Set by Trace before the call is admitted; then used by whichever
  // thread the call's steps run on, in order (call_trace.h).
  std::unique_ptr<CallTrace> trace_;

  Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<RequestHandle> handle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infergate
