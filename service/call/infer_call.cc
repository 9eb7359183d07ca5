#include "service/call/infer_call.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/caught_exception.h"
#include "common/logging.h"
#include "scheduler/core/inference_core.h"
#include "scheduler/execution/drain_refusal.h"
#include "scheduler/execution/request_trace.h"
#include "scheduler/model/string_tensor.h"
#include "service/tracing/call_trace.h"
#include "service/tracing/tracing.h"

namespace infergate {
namespace {

// What an answer holds while it is encoded and written beyond the request:
// its outputs' bytes (copied into the answer), each string element's
// records (string_tensor.h), and for a classification answer each class's
// record and text (score, index, label) per row.
uint64_t AnswerHeldBytes(const InferenceResult& result, uint64_t classes_per_row) {
  constexpr uint64_t kPerClass = 320;
  uint64_t bytes = StringInputHeldBytes(result.outputs);
  for (const NamedTensor& out : result.outputs) {
    if (IsStringTensor(out.tensor)) continue;
    const uint64_t elements = static_cast<uint64_t>(out.tensor.numel());
    bytes += elements * out.tensor.element_size();
    if (classes_per_row > 0 && elements > 0) {
      const uint64_t rows = result.batched && out.tensor.dim() > 0 ? static_cast<uint64_t>(out.tensor.size(0)) : 1;
      bytes += rows * std::min(classes_per_row, elements / std::max<uint64_t>(rows, 1)) * kPerClass;
    }
  }
  return bytes;
}

}  // namespace

// The hand-off to the scheduler: every front end's request goes on to InferenceCore::Infer.
InferBackend InferBackend::Of(InferenceCore& core) {
  InferBackend backend;
  backend.infer = [&core](InferenceRequest request, InferCallback done) {
    return core.Infer(std::move(request), std::move(done));
  };
  backend.known_model = [&core](absl::string_view name) { return core.KnownModel(name); };
  return backend;
}

std::shared_ptr<InferCall> InferCall::Begin(const CallEnvironment& environment, absl::string_view model,
                                            Finish finish) {
  return std::make_shared<InferCall>(environment, model, std::move(finish));
}

InferCall::InferCall(const CallEnvironment& environment, absl::string_view model, Finish finish)
    : environment_(environment), model_(model), finish_(std::move(finish)), received_(Clock::now()) {}

InferCall::~InferCall() = default;

void InferCall::Trace(const CallTraceStart& start,
                      absl::FunctionRef<absl::string_view(absl::string_view name)> header) {
  Tracing* tracing = environment_.tracing();
  if (!tracing) return;
  CallTraceStart at_start = start;
  at_start.received = received_;
  trace_ = tracing->StartCall(at_start, header);
}

void InferCall::NoteAdmission(const absl::Status& outcome) {
  if (trace_) trace_->Admitted(Clock::now(), outcome);
}

bool InferCall::Admit(absl::FunctionRef<absl::string_view()> authorization, uint64_t bytes) {
  if (absl::Status s = environment_.auth().Check(authorization, TokenAuth::Role::kInference); !s.ok()) {
    NoteAdmission(s);
    Refuse(s);
    return false;
  }
  return AdmitOnStream(bytes);
}

bool InferCall::AdmitHolding(absl::FunctionRef<absl::string_view()> authorization, InflightBudget::Reservation held) {
  if (absl::Status s = environment_.auth().Check(authorization, TokenAuth::Role::kInference); !s.ok()) {
    NoteAdmission(s);
    Refuse(s);
    return false;
  }
  if (RefusedWhileDraining()) return false;
  NoteAdmission(absl::OkStatus());
  reservation_ = std::move(held);
  return true;
}

bool InferCall::RefusedWhileDraining() {
  if (!environment_.draining()) return false;
  if (InferCallObserver* o = environment_.observer()) o->OnAdmissionRejection(RejectionReason::kDraining);
  absl::Status refusal = DrainingRefusal();
  NoteAdmission(refusal);
  Refuse(refusal);
  return true;
}

bool InferCall::AdmitOnStream(uint64_t bytes) {
  if (RefusedWhileDraining()) return false;
  absl::StatusOr<InflightBudget::Reservation> reserved = Reserve(bytes);
  NoteAdmission(reserved.status());
  if (!reserved.ok()) {
    Refuse(reserved.status());
    return false;
  }
  reservation_ = *std::move(reserved);
  return true;
}

absl::StatusOr<InflightBudget::Reservation> InferCall::Reserve(uint64_t bytes) {
  InflightBudget* budget = environment_.budget();
  if (!budget) return InflightBudget::Reservation();
  absl::StatusOr<InflightBudget::Reservation> reserved = budget->Reserve(bytes);
  if (!reserved.ok()) {
    if (InferCallObserver* o = environment_.observer()) o->OnAdmissionRejection(RejectionReason::kInflightBytes);
  }
  return reserved;
}

void InferCall::Refuse(const absl::Status& status) {
  RequestLabels labels;
  if (!model_.empty() && environment_.backend().known_model(model_)) labels.model = model_;
  End(labels, status, nullptr);
}

void InferCall::Submit(InferenceRequest request, Encode encode) {
  request.received = received_;
  // Strings cost more held than sent (string_tensor.h): charged now, with
  // the message.
  if (const uint64_t strings = StringInputHeldBytes(request.inputs); strings > 0) {
    if (InflightBudget* budget = environment_.budget()) {
      if (absl::Status room = budget->Extend(reservation_, strings); !room.ok()) {
        if (InferCallObserver* o = environment_.observer()) o->OnAdmissionRejection(RejectionReason::kInflightBytes);
        return Refuse(absl::ResourceExhaustedError(
            absl::StrCat("inputs: the request's strings take ", strings,
                         " bytes held (per element: a reference and the model's str); ", room.message())));
      }
    }
  }
  if (trace_ && trace_->recording()) {
    trace_->Submitted(request, Clock::now());
    request.trace = trace_->record();
  }
  std::shared_ptr<InferCall> self = shared_from_this();
  std::shared_ptr<RequestHandle> handle;
  const absl::Status escaped = RunCatching("queueing the request", [&] {
    handle = environment_.backend().infer(
        std::move(request),
        [self, encode = std::move(encode)](absl::StatusOr<InferenceResult> result, const RequestLabels& labels) {
          absl::Status status = result.status();
          if (status.ok()) {
            if (InflightBudget* budget = self->environment_.budget()) {
              budget->Hold(self->reservation_, AnswerHeldBytes(*result, self->classes_per_row_));
            }
            // Timed only for a sampled call: no clock reads otherwise.
            const bool timed = self->trace_ && self->trace_->recording();
            const Clock::time_point start = timed ? Clock::now() : Clock::time_point();
            status = RunCatching("encoding the answer", [&] { return encode(*result); });
            if (timed) self->trace_->Encoded(start, Clock::now());
          }
          self->End(labels, status, status.ok() ? &*result : nullptr);
        });
  });
  if (!escaped.ok()) return End(RequestLabels(), escaped, nullptr);  // once: End ignores a second end
  bool cancel_now = false;
  {
    MutexLock lock(mu_);
    // An answer given before Infer returned has ended the call: keeping the
    // handle would only hold the finished request.
    if (!ended_) handle_ = handle;
    cancel_now = cancelled_;
  }
  // Outside the lock: cancelling a queued request answers it on this thread.
  if (cancel_now && handle) handle->Cancel();
}

void InferCall::Cancel() {
  std::shared_ptr<RequestHandle> handle;
  {
    MutexLock lock(mu_);
    cancelled_ = true;
    handle = handle_;
  }
  if (handle) handle->Cancel();
}

void InferCall::End(const RequestLabels& labels, const absl::Status& status, const InferenceResult* result) {
  // The handle may hold the request, whose callback holds this call: it
  // goes now, released outside the lock.
  std::shared_ptr<RequestHandle> handle;
  {
    MutexLock lock(mu_);
    if (ended_) return;
    ended_ = true;
    handle.swap(handle_);
  }
  const Clock::time_point ended = Clock::now();
  if (InferCallObserver* o = environment_.observer())
    o->RecordInfer(labels, status, result, MicrosBetween(received_, ended));
  environment_.tally().Count(status);
  LogEnd(labels, status, ended);
  // An unsampled call's span ends with it, recording nothing.
  if (!trace_ || !trace_->recording()) return finish_(status);
  // The answer goes out first; the spans are built after. `finish_` may
  // let the transport drop its share of this call, so hold one here.
  std::shared_ptr<InferCall> keep = shared_from_this();
  finish_(status);
  trace_->End(status, result, ended);
}

void InferCall::LogEnd(const RequestLabels& labels, const absl::Status& status, Clock::time_point ended) const {
  auto trace_id = [this] { return trace_ ? absl::StrCat(" trace_id=", trace_->trace_id_hex()) : std::string(); };
  const absl::StatusCode code = status.code();
  // The server's own faults; the rest are the caller's, or expected.
  if (code == absl::StatusCode::kInternal || code == absl::StatusCode::kUnknown ||
      code == absl::StatusCode::kDataLoss) {
    static LogRateLimiter limiter(5);
    if (uint64_t held = 0; limiter.Allow(&held)) {
      LOG_WARNING << "inference call for model '" << model_ << "' failed: " << status.message() << trace_id()
                  << SuppressedNote(held);
    }
  }
  LOG_DEBUG << "inference call model='" << model_ << "' device=" << (labels.device.empty() ? "-" : labels.device)
            << " status=" << absl::StatusCodeToString(code) << " total_us=" << MicrosBetween(received_, ended)
            << trace_id();
}

}  // namespace infergate
