#include "service/open_inference_stream.h"

#include "absl/strings/str_cat.h"
#include "service/open_inference_codec.h"

namespace infergate {
namespace {

std::unique_ptr<inference::ModelStreamInferResponse> ErrorResponse(const inference::ModelInferRequest& request,
                                                                   const absl::Status& status) {
  auto response = std::make_unique<inference::ModelStreamInferResponse>();
  response->set_error_message(absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message()));
  response->mutable_infer_response()->set_model_name(request.model_name());
  response->mutable_infer_response()->set_model_version(request.model_version());
  response->mutable_infer_response()->set_id(request.id());
  return response;
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

InferStreamReactor::InferStreamReactor(InferenceCore& core, CodecLimits limits, Metrics* metrics,
                                       InflightBudget* budget, const std::atomic<bool>& draining,
                                       Clock::time_point deadline, const absl::Status& refusal)
    : core_(core), limits_(limits), metrics_(metrics), budget_(budget), draining_(draining), deadline_(deadline) {
  if (!refusal.ok()) {
    finished_ = true;
    Finish(grpc::Status(static_cast<grpc::StatusCode>(refusal.code()), std::string(refusal.message())));
    return;
  }
  StartNextRead();
}

void InferStreamReactor::StartNextRead() {
  reading_ = std::make_shared<inference::ModelInferRequest>();
  StartRead(reading_.get());
}

void InferStreamReactor::OnReadDone(bool ok) {
  if (!ok) {  // the client closed its side, or the call ended
    std::unique_lock<std::mutex> lock(mu_);
    reads_done_ = true;
    reading_.reset();
    return Progress(std::move(lock));
  }
  std::shared_ptr<inference::ModelInferRequest> request = std::move(reading_);
  absl::StatusOr<bool> ordered = KeepsRequestOrder(*request);
  // The place is taken here, before the next read starts, so that slots
  // follow the order requests arrived in (Submit may run on two threads).
  Place place;
  place.ordered = !ordered.ok() || *ordered;  // a refusal is answered in its place
  bool read_on;
  {
    std::lock_guard<std::mutex> lock(mu_);
    place.ticket = next_ticket_++;
    if (place.ordered) place.slot = next_slot_++;
    in_flight_[place.ticket] = nullptr;
    ++submitting_;
    read_on = !Full();
    read_paused_ = !read_on;
  }
  if (read_on) StartNextRead();  // else Progress resumes reading once the client catches up
  Submit(std::move(request), place, ordered.status());
}

void InferStreamReactor::Submit(std::shared_ptr<inference::ModelInferRequest> request, Place place,
                                absl::Status refusal) {
  const uint64_t ticket = place.ticket;
  Clock::time_point received = Clock::now();
  InferenceRequest req;
  req.received = received;
  req.deadline = deadline_;
  absl::Status decoded = std::move(refusal);
  if (decoded.ok() && draining_.load()) decoded = absl::UnavailableError("server is draining; retry on another replica");
  // The request's bytes count against the budget until it is answered.
  auto reservation = std::make_shared<InflightBudget::Reservation>();
  if (decoded.ok() && budget_) {
    absl::StatusOr<InflightBudget::Reservation> reserved = budget_->Reserve(request->ByteSizeLong());
    if (reserved.ok()) {
      *reservation = *std::move(reserved);
    } else {
      decoded = reserved.status();
      if (metrics_) metrics_->OnAdmissionRejection("inflight_bytes");
    }
  }
  if (decoded.ok()) decoded = DecodeInferRequest(*request, limits_, &req);
  std::shared_ptr<RequestHandle> handle;
  if (!decoded.ok()) {
    if (metrics_) {
      metrics_->RecordInfer({core_.KnownModel(request->model_name()) ? request->model_name() : "", ""}, decoded,
                            nullptr, MicrosBetween(received, Clock::now()));
    }
    Answer(ErrorResponse(*request, decoded), place);
  } else {
    // The request (whose bytes the input tensors alias) lives until answered.
    handle = core_.Infer(std::move(req), [this, request, reservation, place, received](
                                             absl::StatusOr<InferenceResult> result, const RequestLabels& labels) {
      absl::Status status = result.status();
      auto response = std::make_unique<inference::ModelStreamInferResponse>();
      if (status.ok()) status = EncodeInferResponse(*request, *result, response->mutable_infer_response());
      if (metrics_) {
        metrics_->RecordInfer(labels, status, status.ok() ? &*result : nullptr, MicrosBetween(received, Clock::now()));
      }
      Answer(status.ok() ? std::move(response) : ErrorResponse(*request, status), place);
    });
  }
  // A stream cancelled while this request was being submitted cancels it
  // here, outside the lock: a queued request is answered on this thread, and
  // Answer takes the lock. `submitting_` stays up until then, so the stream
  // cannot finish (and delete itself) under our feet.
  std::shared_ptr<RequestHandle> cancel_now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = in_flight_.find(ticket); it != in_flight_.end()) {
      it->second = std::move(handle);
      if (cancelled_) cancel_now = it->second;
    }
  }
  if (cancel_now) cancel_now->Cancel();
  std::unique_lock<std::mutex> lock(mu_);
  --submitting_;
  Progress(std::move(lock));
}

void InferStreamReactor::Answer(std::unique_ptr<inference::ModelStreamInferResponse> response, Place place) {
  (*response->mutable_infer_response()->mutable_parameters())["triton_final_response"].set_bool_param(true);
  const uint64_t bytes = response->ByteSizeLong();
  std::unique_lock<std::mutex> lock(mu_);
  in_flight_.erase(place.ticket);
  held_bytes_ += bytes;
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
  Progress(std::move(lock));
}

bool InferStreamReactor::Full() const {
  return in_flight_.size() + waiting_.size() + to_write_.size() + (writing_ ? 1 : 0) + submitting_ >=
             kMaxHeldAnswers ||
         held_bytes_ >= kMaxHeldBytes;
}

void InferStreamReactor::DropUnwritten() {
  for (const auto& r : to_write_) held_bytes_ -= r->ByteSizeLong();
  to_write_.clear();
  for (const auto& [slot, r] : waiting_) held_bytes_ -= r->ByteSizeLong();
  waiting_.clear();
}

void InferStreamReactor::OnWriteDone(bool ok) {
  std::unique_lock<std::mutex> lock(mu_);
  if (writing_) held_bytes_ -= writing_->ByteSizeLong();
  writing_.reset();
  if (!ok) {
    cancelled_ = true;  // the client is gone: nothing more can be written
    DropUnwritten();
  }
  Progress(std::move(lock));
}

void InferStreamReactor::OnCancel() {
  std::vector<std::shared_ptr<RequestHandle>> handles;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    for (auto& [ticket, handle] : in_flight_) {
      if (handle) handles.push_back(handle);
    }
  }
  for (auto& h : handles) h->Cancel();
}

void InferStreamReactor::Progress(std::unique_lock<std::mutex> lock) {
  if (finished_) return;
  if (cancelled_) DropUnwritten();
  // A paused stream reads again once it holds less; a cancelled one never
  // does, and with no read outstanding its reads are over.
  bool resume_reading = false;
  if (read_paused_ && !reads_done_) {
    if (cancelled_) {
      read_paused_ = false;
      reads_done_ = true;
    } else if (!Full()) {
      read_paused_ = false;
      resume_reading = true;
    }
  }
  inference::ModelStreamInferResponse* next = nullptr;
  grpc::WriteOptions options;
  if (!writing_ && !to_write_.empty() && !cancelled_) {
    writing_ = std::move(to_write_.front());
    to_write_.pop_front();
    next = writing_.get();
    if (wrote_first_ && !to_write_.empty()) options.set_buffer_hint();
    wrote_first_ = true;
  }
  if (next || resume_reading) {
    // Neither lets the stream finish before this returns: a write or a read
    // is outstanding from here on.
    lock.unlock();
    if (resume_reading) StartNextRead();
    if (next) StartWrite(next, options);
    return;
  }
  if (reads_done_ && in_flight_.empty() && submitting_ == 0 && !writing_ && to_write_.empty() && waiting_.empty()) {
    finished_ = true;
    bool cancelled = cancelled_;
    lock.unlock();
    Finish(cancelled ? grpc::Status::CANCELLED : grpc::Status::OK);
  }
}

}  // namespace infergate
