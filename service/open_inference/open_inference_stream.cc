#include "service/open_inference/open_inference_stream.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "service/grpc/call_context.h"
#include "service/grpc/status_convert.h"
#include "service/open_inference/open_inference_codec.h"

namespace infergate {

inference::ModelStreamInferResponse InBandError(const std::string& model, const std::string& version,
                                                const std::string& id, const absl::Status& status) {
  inference::ModelStreamInferResponse response;
  response.set_error_message(absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message()));
  response.mutable_infer_response()->set_model_name(model);
  response.mutable_infer_response()->set_model_version(version);
  response.mutable_infer_response()->set_id(id);
  return response;
}

namespace {

std::unique_ptr<inference::ModelStreamInferResponse> ErrorResponse(const inference::ModelInferRequest& request,
                                                                   const absl::Status& status) {
  return std::make_unique<inference::ModelStreamInferResponse>(
      InBandError(request.model_name(), request.model_version(), request.id(), status));
}

// A stream request's own parameters: whether its answer keeps request
// order (`stream_order`), and Triton's `triton_enable_empty_final_response`,
// which must be a bool. The flag changes nothing here: it asks for an empty
// final answer after a decoupled model's last one, and every answer here is
// already its request's final one.
absl::StatusOr<bool> KeepsRequestOrder(const inference::ModelInferRequest& request) {
  const auto& params = request.parameters();
  if (auto it = params.find("triton_enable_empty_final_response");
      it != params.end() && it->second.parameter_choice_case() != inference::InferParameter::kBoolParam) {
    return absl::InvalidArgumentError("parameters.triton_enable_empty_final_response: expected a bool");
  }
  auto it = params.find("stream_order");
  if (it == params.end()) return true;
  if (it->second.parameter_choice_case() == inference::InferParameter::kStringParam) {
    const std::string& order = it->second.string_param();
    if (order == "request") return true;
    if (order == "completion") return false;
  }
  return absl::InvalidArgumentError(
      "parameters.stream_order: expected \"request\" (answers in request order, the default) or \"completion\"");
}

}  // namespace

InferStream::InferStream(Transport& transport, const CallEnvironment& environment, const grpc::ServerContextBase& ctx)
    : transport_(transport), environment_(environment), ctx_(ctx) {}

void InferStream::Start(const absl::Status& refusal) {
  if (!refusal.ok()) {
    {
      CallbackLockGuard lock(mu_);
      finished_ = true;
    }
    return transport_.Finish(ToGrpcStatus(refusal));
  }
  deadline_ = SteadyDeadline(ctx_);
  StartNextRead();
}

void InferStream::StartNextRead() {
  reading_ = std::make_shared<inference::ModelInferRequest>();
  transport_.StartRead(reading_.get());
}

void InferStream::OnReadDone(bool ok, uint64_t held_bytes) {
  if (!ok) {  // the client closed its side, or the call ended
    reading_.reset();
    Step step;
    {
      CallbackLockGuard lock(mu_);
      reads_done_ = true;
      step = Progress();
    }
    return Act(step);
  }
  std::shared_ptr<inference::ModelInferRequest> request = std::move(reading_);
  absl::StatusOr<bool> ordered = KeepsRequestOrder(*request);
  Accept(std::move(request), ordered, held_bytes);
}

void InferStream::OnUnreadableRequest(const absl::Status& why) {
  std::shared_ptr<inference::ModelInferRequest> request = std::move(reading_);
  request->Clear();  // nothing a failed parse left in it is the client's
  Accept(std::move(request), why, 0);
}

void InferStream::Accept(std::shared_ptr<inference::ModelInferRequest> request, const absl::StatusOr<bool>& ordered,
                         uint64_t held_bytes) {
  // The place is taken here, before the next read starts, so that slots
  // follow the order requests arrived in (Submit may run on two threads).
  Place place;
  place.ordered = !ordered.ok() || *ordered;  // a refusal is answered in its place
  auto response = std::make_shared<inference::ModelStreamInferResponse>();
  std::shared_ptr<InferCall> call;
  bool read_on;
  bool cancelled;
  {
    CallbackLockGuard lock(mu_);
    place.ticket = next_ticket_++;
    if (place.ordered) place.slot = next_slot_++;
    call = InferCall::Begin(
        environment_, request->model_name(), [this, request, response, place](const absl::Status& status) {
          Answer(status.ok() ? std::make_unique<inference::ModelStreamInferResponse>(std::move(*response))
                             : ErrorResponse(*request, status),
                 place);
        });
    in_flight_[place.ticket] = call;
    ++submitting_;
    read_on = !Full();
    read_paused_ = !read_on;
    cancelled = cancelled_;
  }
  // Outside the lock: a cancelled call is cancelled as soon as it is submitted.
  if (cancelled) call->Cancel();
  if (read_on) StartNextRead();  // else Progress resumes reading once the client catches up
  Submit(*call, std::move(request), std::move(response), ordered.status(), held_bytes);
}

void InferStream::Submit(InferCall& call, std::shared_ptr<inference::ModelInferRequest> request,
                         std::shared_ptr<inference::ModelStreamInferResponse> response, const absl::Status& refusal,
                         uint64_t held_bytes) {
  TraceInferCall(call, ctx_, kModelStreamInferRpc, request->model_name());
  // The caller's token was checked when the stream opened.
  if (!refusal.ok()) {
    call.Refuse(refusal);
  } else if (call.AdmitOnStream(std::max<uint64_t>(request->ByteSizeLong(), held_bytes))) {
    InferenceRequest req;
    req.deadline = deadline_;
    // The request (whose bytes the input tensors alias) lives until answered.
    if (absl::Status s = DecodeInferRequest(*request, environment_.limits(), &req); !s.ok()) {
      call.Refuse(s);
    } else {
      call.Submit(std::move(req), [request, response](InferenceResult& result) {
        return EncodeInferResponse(*request, result, response->mutable_infer_response());
      });
    }
  }
  // `submitting_` kept the stream from finishing (and deleting itself)
  // while the call was handed over.
  Step step;
  {
    CallbackLockGuard lock(mu_);
    --submitting_;
    step = Progress();
  }
  Act(step);
}

void InferStream::Answer(std::unique_ptr<inference::ModelStreamInferResponse> response, Place place) {
  (*response->mutable_infer_response()->mutable_parameters())["triton_final_response"].set_bool_param(true);
  const uint64_t bytes = response->ByteSizeLong();
  Step step;
  {
    CallbackLockGuard lock(mu_);
    in_flight_.erase(place.ticket);
    held_bytes_ += bytes;
    CountHeldAnswers();
    if (!place.ordered) {
      to_write_.push_back(std::move(response));
    } else {
      waiting_.emplace(place.slot, std::move(response));
      // Release the run of ordered answers that is now complete.
      for (auto it = waiting_.begin(); it != waiting_.end() && it->first == next_slot_to_write_;
           it = waiting_.erase(it)) {
        to_write_.push_back(std::move(it->second));
        ++next_slot_to_write_;
      }
    }
    step = Progress();
  }
  Act(step);
}

bool InferStream::Full() const {
  return in_flight_.size() + waiting_.size() + to_write_.size() + (writing_ ? 1 : 0) + submitting_ >= kMaxHeldAnswers ||
         held_bytes_ >= kMaxHeldBytes;
}

void InferStream::CountHeldAnswers() {
  if (held_bytes_ < answers_held_.bytes()) return answers_held_.ShrinkTo(held_bytes_);
  if (InflightBudget* budget = environment_.budget(); budget && held_bytes_ > answers_held_.bytes()) {
    budget->Hold(answers_held_, held_bytes_ - answers_held_.bytes());
  }
}

void InferStream::DropUnwritten() {
  for (const auto& r : to_write_) held_bytes_ -= r->ByteSizeLong();
  to_write_.clear();
  for (const auto& [slot, r] : waiting_) held_bytes_ -= r->ByteSizeLong();
  waiting_.clear();
  CountHeldAnswers();
}

void InferStream::OnWriteDone(bool ok) {
  Step step;
  {
    CallbackLockGuard lock(mu_);
    if (writing_) held_bytes_ -= writing_->ByteSizeLong();
    writing_.reset();
    CountHeldAnswers();
    if (!ok) {
      cancelled_ = true;  // the client is gone: nothing more can be written
      DropUnwritten();
    }
    step = Progress();
  }
  Act(step);
}

void InferStream::OnCancel() {
  std::vector<std::shared_ptr<InferCall>> calls;
  {
    CallbackLockGuard lock(mu_);
    cancelled_ = true;
    for (auto& [ticket, call] : in_flight_) calls.push_back(call);
  }
  // Outside the lock: a queued request is answered on this thread, and
  // Answer takes the lock.
  for (auto& call : calls) call->Cancel();
}

InferStream::Step InferStream::Progress() {
  Step step;
  if (finished_) return step;
  if (cancelled_) DropUnwritten();
  // A paused stream reads again once it holds less; a cancelled one never
  // does, and with no read outstanding its reads are over.
  if (read_paused_ && !reads_done_) {
    if (cancelled_) {
      read_paused_ = false;
      reads_done_ = true;
    } else if (!Full()) {
      read_paused_ = false;
      step.read = true;
    }
  }
  if (!writing_ && !to_write_.empty() && !cancelled_) {
    writing_ = std::move(to_write_.front());
    to_write_.pop_front();
    step.write = writing_.get();
    if (wrote_first_ && !to_write_.empty()) step.options.set_buffer_hint();
    wrote_first_ = true;
  }
  // A write or a read started by Act keeps the stream from finishing.
  if (step.write || step.read) return step;
  if (reads_done_ && in_flight_.empty() && submitting_ == 0 && !writing_ && to_write_.empty() && waiting_.empty()) {
    finished_ = true;
    step.finish = cancelled_ ? grpc::Status::CANCELLED : grpc::Status::OK;
  }
  return step;
}

void InferStream::Act(const Step& step) {
  if (step.read) StartNextRead();
  if (step.write) transport_.StartWrite(step.write, step.options);
  if (step.finish) transport_.Finish(*step.finish);
}

}  // namespace infergate
