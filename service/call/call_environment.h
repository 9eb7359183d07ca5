#pragma once
// CallEnvironment: what every inference call runs in, whichever front end
// (infergate.v1, the Open Inference Protocol over gRPC, its stream, REST,
// TorchServe) took it; built once by the server:
// the core's inference entry, the wire limits, the caller tokens, the
// in-flight byte budget, where finished calls are counted (the observer,
// and the server's own CallTally), request tracing, and the drain switch.
// InferCall (infer_call.h) is the one path a request takes through these;
// the front ends only decode and encode their wire forms.
//
// The core's part is an InferBackend, so the call path is tested with a
// fake core. Ownership: nothing here is owned but the auth and the drain
// flag; the core, budget, observer, tracing and pool must outlive every
// front end.
// Threading: read-only after construction except the drain flag and the
// tally (both atomic).

#include <atomic>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "scheduler/model/event_reasons.h"
#include "scheduler/model/inference_types.h"
#include "scheduler/model/request_handle.h"
#include "service/call/auth.h"
#include "service/call/call_tally.h"
#include "service/call/inflight_budget.h"
#include "service/call/wire_tensor.h"

namespace infergate {

class HandlerWorkPool;
class InferenceCore;
class TraceSettings;
class Tracing;

// What the call path needs of the core.
struct InferBackend {
  // Routes, validates and queues one request (InferenceCore::Infer).
  std::function<std::shared_ptr<RequestHandle>(InferenceRequest, InferCallback)> infer;
  // Whether `name` is a repository model, for bounded metric labels.
  std::function<bool(absl::string_view name)> known_model;

  // The core's own: `infer` is InferenceCore::Infer, `known_model`
  // InferenceCore::KnownModel.
  static InferBackend Of(InferenceCore& core);
};

// Where the call path reports each call's end (Metrics in the server).
// Called on front-end and worker threads; must not block.
class InferCallObserver {
 public:
  virtual ~InferCallObserver() = default;
  // One finished inference call: `status` is what the client got; `result`
  // is set when the model ran and the answer went out. `labels.model` is a
  // repository model or "".
  virtual void RecordInfer(const RequestLabels& labels, const absl::Status& status, const InferenceResult* result,
                           uint64_t total_us) = 0;
  // A call refused at admission: kDraining or kInflightBytes (also counted
  // by RecordInfer as a finished call).
  virtual void OnAdmissionRejection(RejectionReason reason) = 0;
  // A built-in handler turned one instance of a request for `model` (a
  // repository model) into the model's input in `seconds`: image decoding
  // and preprocessing, JSON lists to tensors.
  virtual void OnHandlerInput(const std::string& model, double seconds) = 0;
};

class CallEnvironment {
 public:
  // `observer`, `budget` and `tracing` may be null (no metrics; no byte
  // limit; tracing off).
  // `handler_pool` may be null (the built-in handlers' work runs on the
  // calling thread).
  // `trace_settings` may be null (the trace extension is not served).
  CallEnvironment(InferBackend backend, CodecLimits limits, TokenAuth auth, InflightBudget* budget,
                  InferCallObserver* observer, Tracing* tracing = nullptr, HandlerWorkPool* handler_pool = nullptr,
                  TraceSettings* trace_settings = nullptr)
      : backend_(std::move(backend)),
        limits_(limits),
        auth_(std::move(auth)),
        budget_(budget),
        observer_(observer),
        tracing_(tracing),
        handler_pool_(handler_pool),
        trace_settings_(trace_settings) {}
  CallEnvironment(const CallEnvironment&) = delete;
  CallEnvironment& operator=(const CallEnvironment&) = delete;

  const InferBackend& backend() const { return backend_; }
  const CodecLimits& limits() const { return limits_; }
  const TokenAuth& auth() const { return auth_; }
  InflightBudget* budget() const { return budget_; }
  InferCallObserver* observer() const { return observer_; }
  Tracing* tracing() const { return tracing_; }
  HandlerWorkPool* handler_pool() const { return handler_pool_; }
  // Triton's trace extension's settings: the tracer's, or the server's own
  // "off" ones when tracing is off.
  TraceSettings* trace_settings() const { return trace_settings_; }

  // From now on every front end refuses new inference (UNAVAILABLE, counted
  // as "draining") and reports not ready; accepted calls, also on open
  // streams, run to the end. One switch for all of them.
  void StartDraining() { draining_.store(true); }
  bool draining() const { return draining_.load(); }

  // How every call ended, counted by InferCall.
  CallTally& tally() const { return tally_; }

 private:
  const InferBackend backend_;
  const CodecLimits limits_;
  const TokenAuth auth_;
  InflightBudget* const budget_;
  InferCallObserver* const observer_;
  Tracing* const tracing_;
  HandlerWorkPool* const handler_pool_;
  TraceSettings* const trace_settings_;
  std::atomic<bool> draining_{false};
  mutable CallTally tally_;
};

}  // namespace infergate
