#include "service/server/completion_queue_infer.h"

#include <grpcpp/alarm.h>
#include <grpcpp/generic/async_generic_service.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/caught_exception.h"
#include "common/mutex.h"
#include "common/thread_name.h"
#include "service/grpc/call_context.h"
#include "service/call/infer_call.h"
#include "service/call/intake_gate.h"
#include "service/grpc/message_bytes.h"
#include "service/grpc/model_infer_answer_bytes.h"
#include "service/v1/inference_service.h"
#include "service/open_inference/open_inference_service.h"
#include "service/open_inference/open_inference_stream.h"
#include "service/torchserve/torchserve_grpc.h"
#include "service/grpc/status_convert.h"

namespace infergate {

struct CompletionQueueInfer::Context {
  Context(const FrontEnd& front_end, InferenceServiceImpl& v1_service, OpenInferenceService& open_inference,
          const TorchServeGrpcService& torchserve, uint64_t max_message_bytes)
      : front_end(front_end),
        v1_service(v1_service),
        open_inference(open_inference),
        torchserve(torchserve),
        gate(front_end.budget(), max_message_bytes, kMaxWaitingReads) {}

  const FrontEnd& front_end;
  InferenceServiceImpl& v1_service;
  OpenInferenceService& open_inference;
  const TorchServeGrpcService& torchserve;
  // Unary calls arrive unread (generic calls) and streams read one message
  // at a time; each read waits here for room in the budget.
  IntakeGate gate;
  grpc::AsyncGenericService generic;

  // Calls posted and not yet freed, and whether Stop has begun (no more
  // posting). Stop shuts the queues down only once no call is left, so no
  // call ever starts an operation on a queue that is gone.
  Mutex mu;
  int live_calls ABSL_GUARDED_BY(mu) = 0;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::condition_variable no_calls_left;  // notified under `mu`: Stop frees this once it sees none

  // Counts a call about to be posted; false once stopping (post none).
  bool Track() {
    MutexLock lock(mu);
    if (stopping) return false;
    ++live_calls;
    return true;
  }
  void Untrack() {
    MutexLock lock(mu);
    if (--live_calls == 0 && stopping) no_calls_left.notify_all();
  }
};

namespace {

using Context = CompletionQueueInfer::Context;

// One call on a completion queue, from posting to freeing. Every operation
// it starts carries one of its tags, and the queue's poller hands each tag
// back to Handle: the call arrived (or, not ok, the server shut down first),
// a stream's read or write ended, its answer or status was written, and
// gRPC is done with it (which also tells of a client that cancelled, or a
// deadline that passed). A call is freed once both its finish and gRPC's
// done notice have come back.
class AsyncCall {
 public:
  enum class Event { kArrived, kRead, kWritten, kFinished, kDone, kRetry };
  struct Tag {
    AsyncCall* call;
    Event event;
  };

  virtual ~AsyncCall() = default;

  // Handles one of the call's events; may free the call. On the poller of
  // the call's queue.
  void Handle(Event event, bool ok) {
    switch (event) {
      case Event::kArrived:
        if (!ok) break;  // posted, and the server shut down before a call came
        PostAnother();
        ends_left_ = 2;  // its finish and gRPC's done notice
        Begin();
        return;
      case Event::kRead:
        return OnReadDone(ok);
      case Event::kWritten:
        return OnWriteDone(ok);
      case Event::kRetry:
        --ends_left_;  // the alarm is back
        alarm_set_ = false;
        if (ok && waiting_ && !gone_) AskToRead(/*again=*/true);
        if (ends_left_ > 0) return;
        break;
      case Event::kDone:
        gone_ = ctx_.IsCancelled();
        if (gone_) {
          OnCancelled();
          if (waiting_) {
            // Never read: out of line, and the call ends here.
            if (in_line_) context_.gate.Leave(this);
            waiting_ = in_line_ = false;
            if (alarm_set_) retry_.Cancel();
            OnLeftUnread();
          }
        }
        OnDoneNotice(gone_);
        [[fallthrough]];
      case Event::kFinished:
        if (--ends_left_ > 0) return;
        break;
    }
    // Counted out only once gone: Stop may shut the queues down after.
    Context& context = context_;
    delete this;
    context.Untrack();
  }

 protected:
  AsyncCall(Context& context, grpc::ServerCompletionQueue* queue) : context_(context), queue_(queue) {}

  // Posts a request for the next call of the same RPC on the same queue.
  virtual void PostAnother() = 0;
  // The call has arrived: serves it; it ends by starting the finish.
  virtual void Begin() = 0;
  // The client cancelled, or its deadline passed: a queued request leaves
  // its queue, a running one's answer is dropped.
  virtual void OnCancelled() = 0;
  // A stream's read or write ended; a unary call starts neither.
  virtual void OnReadDone(bool /*ok*/) {}
  virtual void OnWriteDone(bool /*ok*/) {}
  // The intake gate admitted a read: `ticket_` holds its share; start it.
  virtual void StartAdmittedRead() = 0;
  // The read found no room in time (`waited`), or the line full: a unary
  // call is refused unread (true); a stream waits on (false).
  virtual bool RefuseWithoutRoom(std::chrono::steady_clock::duration waited) = 0;
  // The client left while the call waited to read: it ends.
  virtual void OnLeftUnread() = 0;
  // gRPC is done with the call (`cancelled`: the client went away, or its
  // deadline passed); after OnCancelled.
  virtual void OnDoneNotice(bool /*cancelled*/) {}

  // Starts a read of one message once the intake gate has room for it:
  // now, or from a retry alarm on this call's queue.
  void AskToRead(bool again = false) {
    if (peer_.empty()) peer_ = ctx_.peer();
    if (!again) asked_ = std::chrono::steady_clock::now();
    // In line: only the first may pass; out of it (a stream that found the
    // line full): it asks afresh.
    const IntakeGate::Turn turn =
        in_line_ ? context_.gate.Retry(this, peer_, &ticket_) : context_.gate.Enter(this, peer_, &ticket_);
    if (turn == IntakeGate::Turn::kAdmitted) {
      waiting_ = in_line_ = false;
      retry_wait_ = kFirstRetry;
      return StartAdmittedRead();
    }
    in_line_ = turn == IntakeGate::Turn::kWait;
    const auto waited = turn == IntakeGate::Turn::kRefused ? std::chrono::steady_clock::duration::max()
                                                             : std::chrono::steady_clock::now() - asked_;
    if (RefuseWithoutRoom(waited)) {
      if (in_line_) context_.gate.Leave(this);
      waiting_ = in_line_ = false;
      return;
    }
    // Asks again after a short wait, longer as it goes on (to 8 ms).
    waiting_ = true;
    ++ends_left_;
    alarm_set_ = true;
    retry_.Set(queue_, std::chrono::system_clock::now() + retry_wait_, &retry_tag_);
    retry_wait_ = std::min(retry_wait_ * 2, kLastRetry);
  }

  static constexpr std::chrono::microseconds kFirstRetry{500};
  static constexpr std::chrono::microseconds kLastRetry{8000};

  Context& context_;
  grpc::ServerCompletionQueue* const queue_;
  // Generic: unary inference calls are taken unread (the intake gate
  // decides when their message is read); a stream's context is the same.
  grpc::GenericServerContext ctx_;
  Tag arrived_{this, Event::kArrived};
  Tag read_{this, Event::kRead};
  Tag written_{this, Event::kWritten};
  Tag finished_{this, Event::kFinished};
  Tag done_{this, Event::kDone};
  Tag retry_tag_{this, Event::kRetry};
  // The read's place at the gate and share of the budget; the connection
  // it came by, as gRPC names it (the gate keeps its history).
  IntakeGate::Ticket ticket_;
  std::string peer_;

 private:
  int ends_left_ = 0;      // touched only by the queue's poller
  bool waiting_ = false;   // waiting for room to read
  bool in_line_ = false;   // in the gate's line (a stream that found it full waits out of it)
  std::chrono::steady_clock::time_point asked_;  // when it first asked to read
  bool gone_ = false;      // the client cancelled, or its deadline passed
  bool alarm_set_ = false;
  std::chrono::microseconds retry_wait_ = kFirstRetry;
  grpc::Alarm retry_;
};

// What one unary RPC needs beyond the common path: its request and answer
// messages, where its model name is, and how an admitted call is submitted.
struct V1Infer {
  using Request = v1::InferRequest;
  using Response = v1::InferResponse;
  static constexpr const InferRpc& kRpc = kV1InferRpc;
  static const std::string& Model(const Request& request) { return request.model(); }
  static void Submit(Context& context, InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                     const Request& request, Response* response) {
    context.v1_service.SubmitInfer(call, ctx, model, &request, response);
  }
  static absl::Status Serialize(const Response& response, grpc::ByteBuffer* out) {
    return SerializeAnswerBytes(response, out);
  }
};

struct ModelInfer {
  using Request = inference::ModelInferRequest;
  using Response = inference::ModelInferResponse;
  static constexpr const InferRpc& kRpc = kModelInferRpc;
  static const std::string& Model(const Request& request) { return request.model_name(); }
  static void Submit(Context& context, InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                     const Request& request, Response* response) {
    context.open_inference.SubmitModelInfer(call, ctx, model, &request, response);
  }
  // The outputs' bytes move into the answer's slices, uncopied.
  static absl::Status Serialize(Response& response, grpc::ByteBuffer* out) {
    return SerializeModelInferAnswer(response, out);
  }
};

struct TorchServePredictions {
  using Request = org::pytorch::serve::grpc::inference::PredictionsRequest;
  using Response = org::pytorch::serve::grpc::inference::PredictionResponse;
  static constexpr const InferRpc& kRpc = kTorchServePredictionsRpc;
  static const std::string& Model(const Request& request) { return request.model_name(); }
  // The handler takes the request's input bytes (they move, not copy).
  static void Submit(Context& context, InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                     Request& request, Response* response) {
    context.torchserve.SubmitPredictions(call, ctx, model, &request, response);
  }
  static absl::Status Serialize(const Response& response, grpc::ByteBuffer* out) {
    return SerializeAnswerBytes(response, out);
  }
};

// One unary call's messages, whichever RPC it is.
class UnaryExchange {
 public:
  virtual ~UnaryExchange() = default;
  virtual const InferRpc& rpc() const = 0;
  // Parses the request (INVALID_ARGUMENT naming the message otherwise);
  // the bytes may go once it returns.
  virtual absl::Status Parse(const grpc::ByteBuffer& bytes) = 0;
  virtual const std::string& BodyModel() const = 0;
  virtual void Submit(Context& context, InferCall& call, const grpc::ServerContextBase& ctx,
                      const std::string& model) = 0;
  // Serialises the answer into `out` and lets the answer message go: from
  // then on only `out` holds it.
  virtual absl::Status SerializeAnswer(grpc::ByteBuffer* out) = 0;
};

template <typename Method>
class UnaryExchangeOf final : public UnaryExchange {
 public:
  const InferRpc& rpc() const override { return Method::kRpc; }
  absl::Status Parse(const grpc::ByteBuffer& bytes) override { return ParseRequestBytes(bytes, &request_); }
  const std::string& BodyModel() const override { return Method::Model(request_); }
  void Submit(Context& context, InferCall& call, const grpc::ServerContextBase& ctx,
              const std::string& model) override {
    // The input tensors alias `request_`'s bytes, which live as long.
    Method::Submit(context, call, ctx, model, request_, &response_);
  }
  absl::Status SerializeAnswer(grpc::ByteBuffer* out) override {
    const absl::Status serialized = Method::Serialize(response_, out);
    typename Method::Response().Swap(&response_);  // its outputs' bytes go now, not with the call
    return serialized;
  }

 private:
  typename Method::Request request_;
  typename Method::Response response_;
};

// The exchange for a generic call's method ("/inference.GRPCInferenceService
// /ModelInfer"); null for a method this front end does not serve.
std::unique_ptr<UnaryExchange> ExchangeFor(absl::string_view method) {
  absl::ConsumePrefix(&method, "/");
  if (method == V1Infer::kRpc.full_name) return std::make_unique<UnaryExchangeOf<V1Infer>>();
  if (method == ModelInfer::kRpc.full_name) return std::make_unique<UnaryExchangeOf<ModelInfer>>();
  if (method == TorchServePredictions::kRpc.full_name) return std::make_unique<UnaryExchangeOf<TorchServePredictions>>();
  return nullptr;
}

// A unary inference call (Infer, ModelInfer or TorchServe's Predictions) taken as a generic call:
// its message is read only once the intake gate has room for it, then
// parsed, admitted (holding the gate's room, shrunk to the message) and
// submitted. The answer is written by the device worker that computed it
// (or by the poller, for a call refused early).
class AsyncUnaryInferCall final : public AsyncCall {
 public:
  // Posts a request for the next generic call on `queue`, unless stopping.
  static void Post(Context& context, grpc::ServerCompletionQueue* queue) {
    if (!context.Track()) return;
    auto* call = new AsyncUnaryInferCall(context, queue);
    call->ctx_.AsyncNotifyWhenDone(&call->done_);
    context.generic.RequestCall(&call->ctx_, &call->stream_, queue, queue, &call->arrived_);
  }

 private:
  AsyncUnaryInferCall(Context& context, grpc::ServerCompletionQueue* queue) : AsyncCall(context, queue) {}

  void PostAnother() override { Post(context_, queue_); }
  void OnCancelled() override {
    if (call_) call_->Cancel();
  }

  void Begin() override {
    exchange_ = ExchangeFor(ctx_.method());
    if (!exchange_) {
      // Only the two inference RPCs are taken generically; any other
      // method the server has no handler for lands here.
      return stream_.Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                         absl::StrCat("method ", ctx_.method().substr(0, 128), " is not served")),
                            &finished_);
    }
    AskToRead();
  }

  // Refused before the message was read: an InferCall ends it, so that it
  // is counted and traced as any other refusal.
  void EndUnread(const absl::Status& status) {
    BeginCall(ModelNameOf(ctx_, ""));
    call_->Refuse(status);
  }
  // A unary call waits for room at most kMaxReadWait: reads take
  // milliseconds, so room comes back quickly unless the budget is held by
  // work; then the call is refused, as a REST request would be.
  bool RefuseWithoutRoom(std::chrono::steady_clock::duration waited) override {
    // A call of a connection of small requests waits for a fast-lane slot,
    // not for room: it waits on (its deadline and its client bound it).
    if (waited < kMaxReadWait || context_.gate.FastLaneEligible(peer_)) return false;
    if (InferCallObserver* o = context_.front_end.observer()) o->OnAdmissionRejection(RejectionReason::kInflightBytes);
    EndUnread(context_.gate.Refusal());
    return true;
  }
  void OnLeftUnread() override { EndUnread(absl::CancelledError("the client left while its request waited to be read")); }
  static constexpr std::chrono::milliseconds kMaxReadWait{250};

  void StartAdmittedRead() override { stream_.Read(&request_bytes_, &read_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      ticket_ = IntakeGate::Ticket();
      // No message came: the client half-closed without one, or went away
      // (a load tool ending its run resets the streams it still has open;
      // gRPC answers a message over the size limit itself). Which of the
      // two is known only once gRPC's done notice comes, so the call is
      // answered now and counted then (OnDoneNotice): a client that left
      // as CANCELLED, not as a bad request.
      no_message_ = true;
      stream_.Finish(ToGrpcStatus(NoMessage()), &finished_);
      return;
    }
    // A request that does not parse is refused once the caller is admitted
    // (its token checked); its model is then the one the metadata names, if
    // any. The bytes go once parsed: the request holds its own copy.
    const absl::Status parsed = exchange_->Parse(request_bytes_);
    const uint64_t request_bytes = request_bytes_.Length();
    request_bytes_.Clear();
    // The gate's room becomes the call's share: the message's size.
    const absl::Status charged = context_.gate.Read(peer_, request_bytes, &ticket_);
    const std::string model = ModelNameOf(ctx_, exchange_->BodyModel());
    BeginCall(model);
    TraceInferCall(*call_, ctx_, exchange_->rpc(), model);
    if (!charged.ok()) return call_->Refuse(charged);
    if (!call_->AdmitHolding([this] { return Authorization(ctx_); }, std::move(ticket_.room()))) return;
    if (!parsed.ok()) return call_->Refuse(parsed);
    exchange_->Submit(context_, *call_, ctx_, model);
  }

  absl::Status NoMessage() const {
    return absl::InvalidArgumentError(absl::StrCat(exchange_->rpc().method, ": no request message"));
  }
  // Counts and traces a call that ended with no message (answered already).
  void OnDoneNotice(bool cancelled) override {
    if (!no_message_) return;
    call_ = InferCall::Begin(context_.front_end, ModelNameOf(ctx_, ""), [](const absl::Status&) {});
    call_->Refuse(cancelled ? absl::CancelledError("the client left before its request message came") : NoMessage());
  }

  // Runs once: on this poller for a refusal, else on the device worker
  // that answered. The answer is written from `response_bytes_`, which
  // lives until the finish comes back.
  void BeginCall(const std::string& model) {
    call_ = InferCall::Begin(context_.front_end, model, [this](const absl::Status& status) {
      absl::Status answer = status;
      if (answer.ok()) answer = exchange_->SerializeAnswer(&response_bytes_);
      if (answer.ok()) {
        // The answer is held until gRPC has written it: counted in the
        // budget meanwhile, so that new reads wait for it to go.
        if (InflightBudget* budget = context_.front_end.budget()) answer_held_ = budget->Hold(response_bytes_.Length());
        stream_.WriteAndFinish(response_bytes_, grpc::WriteOptions(), grpc::Status::OK, &finished_);
      } else {
        stream_.Finish(ToGrpcStatus(answer), &finished_);
      }
    });
  }

  std::shared_ptr<InferCall> call_;
  bool no_message_ = false;  // the read ended without a message (answered, counted at the done notice)
  std::unique_ptr<UnaryExchange> exchange_;
  grpc::GenericServerAsyncReaderWriter stream_{&ctx_};
  grpc::ByteBuffer request_bytes_;
  grpc::ByteBuffer response_bytes_;
  InflightBudget::Reservation answer_held_;  // response_bytes_' share of the budget, until the call goes
};

// A ModelStreamInfer stream (open_inference_stream.h) over the queue: its
// reads, writes and finish are started here, and their ends come back to
// the InferStream through the poller. A read (and the request it submits)
// runs on the poller; a write starts on whichever thread made an answer
// ready, mostly the device worker that computed it.
//
// The stream's messages travel as bytes (the method is raw) and are parsed
// and serialised here, so that a message that is not a request is answered
// in-band, INVALID_ARGUMENT, in its place; gRPC's own parsing would end its
// read as if the client had closed its side, and the stream OK.
class AsyncStreamInferCall final : public AsyncCall, private InferStream::Transport {
 public:
  // Posts a request for the next stream on `queue`, unless stopping.
  static void Post(Context& context, grpc::ServerCompletionQueue* queue) {
    if (!context.Track()) return;
    auto* call = new AsyncStreamInferCall(context, queue);
    call->ctx_.AsyncNotifyWhenDone(&call->done_);
    context.open_inference.RequestModelStreamInfer(&call->ctx_, &call->stream_, queue, queue, &call->arrived_);
  }

 private:
  AsyncStreamInferCall(Context& context, grpc::ServerCompletionQueue* queue) : AsyncCall(context, queue) {}

  void PostAnother() override { Post(context_, queue_); }
  void Begin() override { infer_.Start(CheckToken(context_.front_end.auth(), ctx_, TokenAuth::Role::kInference)); }
  void OnCancelled() override { infer_.OnCancel(); }
  void OnReadDone(bool ok) override {
    // The read's share of the budget goes once the message is parsed: the
    // stream's own admission of the request counts it from there.
    if (!ok) {
      ticket_ = IntakeGate::Ticket();
      return infer_.OnReadDone(false);
    }
    const absl::Status parsed = ParseRequestBytes(read_bytes_, reading_);
    (void)context_.gate.Read(peer_, read_bytes_.Length(), &ticket_);  // notes the size; the stream charges it
    read_bytes_.Clear();
    ticket_ = IntakeGate::Ticket();
    if (!parsed.ok()) return infer_.OnUnreadableRequest(parsed);
    infer_.OnReadDone(true);
  }
  void OnWriteDone(bool ok) override { infer_.OnWriteDone(ok); }

  // Each message of a stream is read once the intake gate has room for it;
  // a stream that finds the line full waits on (its messages are in order,
  // one at a time) rather than failing.
  void StartRead(inference::ModelInferRequest* request) override {
    reading_ = request;
    AskToRead();
  }
  void StartAdmittedRead() override { stream_.Read(&read_bytes_, &read_); }
  bool RefuseWithoutRoom(std::chrono::steady_clock::duration) override { return false; }
  void OnLeftUnread() override { infer_.OnReadDone(false); }
  void StartWrite(const inference::ModelStreamInferResponse* response, grpc::WriteOptions options) override {
    if (absl::Status serialized = SerializeAnswerBytes(*response, &write_bytes_); !serialized.ok()) {
      // Only an answer over protobuf's 2 GB limit fails: it goes as an
      // error in its place.
      const inference::ModelInferResponse& answered = response->infer_response();
      (void)SerializeAnswerBytes(
          InBandError(answered.model_name(), answered.model_version(), answered.id(), serialized), &write_bytes_);
    }
    stream_.Write(write_bytes_, options, &written_);
  }
  void Finish(const grpc::Status& status) override { stream_.Finish(status, &finished_); }

  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_{&ctx_};
  // The read outstanding: its bytes, and the request they are parsed into.
  grpc::ByteBuffer read_bytes_;
  inference::ModelInferRequest* reading_ = nullptr;
  // The write outstanding (one at a time).
  grpc::ByteBuffer write_bytes_;
  InferStream infer_{*this, context_.front_end, ctx_};
};

void Poll(grpc::ServerCompletionQueue* queue) {
  void* tag = nullptr;
  bool ok = false;
  while (queue->Next(&tag, &ok)) {
    auto* event = static_cast<AsyncCall::Tag*>(tag);
    // Calls answer their own failures; what escapes one anyway is logged
    // and counted, and the poller goes on.
    (void)RunCatching("a completion-queue call", [&] { event->call->Handle(event->event, ok); });
  }
}

}  // namespace

CompletionQueueInfer::CompletionQueueInfer(grpc::ServerBuilder& builder, int threads, const FrontEnd& front_end,
                                           InferenceServiceImpl& v1_service, OpenInferenceService& open_inference,
                                           const TorchServeGrpcService& torchserve, uint64_t max_message_bytes)
    : context_(std::make_unique<Context>(front_end, v1_service, open_inference, torchserve, max_message_bytes)) {
  builder.RegisterAsyncGenericService(&context_->generic);
  for (int i = 0; i < threads; ++i) queues_.push_back(builder.AddCompletionQueue());
}

CompletionQueueInfer::~CompletionQueueInfer() {
  if (!stopped_) Stop();
}

void CompletionQueueInfer::Start() {
  started_ = true;
  for (size_t i = 0; i < queues_.size(); ++i) {
    grpc::ServerCompletionQueue* queue = queues_[i].get();
    for (int n = 0; n < kPostedPerMethod; ++n) {
      // Generic calls: Infer and ModelInfer both.
      AsyncUnaryInferCall::Post(*context_, queue);
      AsyncUnaryInferCall::Post(*context_, queue);
      AsyncStreamInferCall::Post(*context_, queue);
    }
    pollers_.emplace_back([queue, i] {
      NameThisThread(absl::StrCat("grpc poller ", i));
      Poll(queue);
    });
  }
}

void CompletionQueueInfer::Stop() {
  stopped_ = true;
  {
    UniqueMutexLock lock(context_->mu);
    context_->stopping = true;
    // The server's shutdown returns the posted requests (not ok); calls in
    // progress end as the core answers them.
    context_->no_calls_left.wait(lock.native(), [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return context_->live_calls == 0;
    });
  }
  for (auto& queue : queues_) queue->Shutdown();
  for (std::thread& poller : pollers_) poller.join();
  if (!started_) {
    // A server that failed to start: nothing was posted, but a queue is
    // drained before it goes.
    void* tag = nullptr;
    bool ok = false;
    for (auto& queue : queues_) {
      while (queue->Next(&tag, &ok)) {
      }
    }
  }
}

}  // namespace infergate
