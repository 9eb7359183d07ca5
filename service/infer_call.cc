#include "service/infer_call.h"

#include <utility>

#include "scheduler/inference_core.h"

namespace infergate {

InferBackend InferBackend::Of(InferenceCore& core) {
  InferBackend backend;
  backend.infer = [&core](InferenceRequest request, InferCallback done) {
    return core.Infer(std::move(request), std::move(done));
  };
  backend.known_model = [&core](absl::string_view name) { return core.KnownModel(name); };
  return backend;
}

std::shared_ptr<InferCall> InferCall::Begin(const FrontEnd& front_end, absl::string_view model, Finish finish) {
  return std::make_shared<InferCall>(front_end, model, std::move(finish));
}

InferCall::InferCall(const FrontEnd& front_end, absl::string_view model, Finish finish)
    : front_end_(front_end), model_(model), finish_(std::move(finish)), received_(Clock::now()) {}

bool InferCall::Admit(absl::FunctionRef<absl::string_view()> authorization, uint64_t bytes) {
  if (absl::Status s = front_end_.auth().Check(authorization, TokenAuth::Role::kInference); !s.ok()) {
    Refuse(s);
    return false;
  }
  return AdmitOnStream(bytes);
}

bool InferCall::AdmitOnStream(uint64_t bytes) {
  if (front_end_.draining()) {
    if (InferCallObserver* o = front_end_.observer()) o->OnAdmissionRejection(RejectionReason::kDraining);
    Refuse(absl::UnavailableError("server is draining; retry on another replica"));
    return false;
  }
  absl::StatusOr<InflightBudget::Reservation> reserved = Reserve(bytes);
  if (!reserved.ok()) {
    Refuse(reserved.status());
    return false;
  }
  reservation_ = *std::move(reserved);
  return true;
}

absl::StatusOr<InflightBudget::Reservation> InferCall::Reserve(uint64_t bytes) {
  InflightBudget* budget = front_end_.budget();
  if (!budget) return InflightBudget::Reservation();
  absl::StatusOr<InflightBudget::Reservation> reserved = budget->Reserve(bytes);
  if (!reserved.ok()) {
    if (InferCallObserver* o = front_end_.observer()) o->OnAdmissionRejection(RejectionReason::kInflightBytes);
  }
  return reserved;
}

void InferCall::Refuse(const absl::Status& status) {
  RequestLabels labels;
  if (!model_.empty() && front_end_.backend().known_model(model_)) labels.model = model_;
  End(labels, status, nullptr);
}

void InferCall::Submit(InferenceRequest request, Encode encode) {
  request.received = received_;
  std::shared_ptr<InferCall> self = shared_from_this();
  std::shared_ptr<RequestHandle> handle = front_end_.backend().infer(
      std::move(request),
      [self, encode = std::move(encode)](absl::StatusOr<InferenceResult> result, const RequestLabels& labels) {
        absl::Status status = result.status();
        if (status.ok()) status = encode(*result);
        self->End(labels, status, status.ok() ? &*result : nullptr);
      });
  bool cancel_now = false;
  {
    absl::MutexLock lock(&mu_);
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
    absl::MutexLock lock(&mu_);
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
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    ended_ = true;
    handle.swap(handle_);
  }
  if (InferCallObserver* o = front_end_.observer()) {
    o->RecordInfer(labels, status, result, MicrosBetween(received_, Clock::now()));
  }
  finish_(status);
}

}  // namespace infergate
