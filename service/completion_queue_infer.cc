#include "service/completion_queue_infer.h"

#include <condition_variable>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "common/caught_exception.h"
#include "common/mutex.h"
#include "common/thread_name.h"
#include "service/call_context.h"
#include "service/infer_call.h"
#include "service/message_bytes.h"
#include "service/inference_service.h"
#include "service/open_inference_service.h"
#include "service/open_inference_stream.h"
#include "service/status_convert.h"

namespace infergate {

struct CompletionQueueInfer::Context {
  Context(const FrontEnd& front_end, InferenceServiceImpl& v1_service, OpenInferenceService& open_inference)
      : front_end(front_end), v1_service(v1_service), open_inference(open_inference) {}

  const FrontEnd& front_end;
  InferenceServiceImpl& v1_service;
  OpenInferenceService& open_inference;

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
  enum class Event { kArrived, kRead, kWritten, kFinished, kDone };
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
      case Event::kDone:
        if (ctx_.IsCancelled()) OnCancelled();
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

  Context& context_;
  grpc::ServerCompletionQueue* const queue_;
  grpc::ServerContext ctx_;
  Tag arrived_{this, Event::kArrived};
  Tag read_{this, Event::kRead};
  Tag written_{this, Event::kWritten};
  Tag finished_{this, Event::kFinished};
  Tag done_{this, Event::kDone};

 private:
  int ends_left_ = 0;  // touched only by the queue's poller
};

// What one RPC needs beyond the common path: how its requests are posted
// (as bytes: the methods are raw), where its model name is, and how an
// admitted call is decoded and submitted.
struct V1Infer {
  using Request = v1::InferRequest;
  using Response = v1::InferResponse;
  static constexpr const InferRpc& kRpc = kV1InferRpc;
  static void Post(Context& context, grpc::ServerContext* ctx, grpc::ByteBuffer* request,
                   grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* responder, grpc::ServerCompletionQueue* queue,
                   void* tag) {
    context.v1_service.RequestInfer(ctx, request, responder, queue, queue, tag);
  }
  static const std::string& Model(const Request& request) { return request.model(); }
  static void Submit(Context& context, InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                     const Request& request, Response* response) {
    context.v1_service.SubmitInfer(call, ctx, model, &request, response);
  }
};

struct ModelInfer {
  using Request = inference::ModelInferRequest;
  using Response = inference::ModelInferResponse;
  static constexpr const InferRpc& kRpc = kModelInferRpc;
  static void Post(Context& context, grpc::ServerContext* ctx, grpc::ByteBuffer* request,
                   grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* responder, grpc::ServerCompletionQueue* queue,
                   void* tag) {
    context.open_inference.RequestModelInfer(ctx, request, responder, queue, queue, tag);
  }
  static const std::string& Model(const Request& request) { return request.model_name(); }
  static void Submit(Context& context, InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model,
                     const Request& request, Response* response) {
    context.open_inference.SubmitModelInfer(call, ctx, model, &request, response);
  }
};

// A unary inference call: one request, one answer, written by the device
// worker that computed it (or by the poller, for a call refused early).
template <typename Method>
class AsyncUnaryInferCall final : public AsyncCall {
 public:
  // Posts a request for the next call of `Method` on `queue`, unless
  // stopping.
  static void Post(Context& context, grpc::ServerCompletionQueue* queue) {
    if (!context.Track()) return;
    auto* call = new AsyncUnaryInferCall(context, queue);
    call->ctx_.AsyncNotifyWhenDone(&call->done_);
    Method::Post(context, &call->ctx_, &call->request_bytes_, &call->responder_, queue, &call->arrived_);
  }

 private:
  AsyncUnaryInferCall(Context& context, grpc::ServerCompletionQueue* queue) : AsyncCall(context, queue) {}

  void PostAnother() override { Post(context_, queue_); }
  void OnCancelled() override {
    if (call_) call_->Cancel();
  }

  void Begin() override {
    // A request that does not parse is refused once the caller is admitted
    // (its token checked); its model is then the one the metadata names, if
    // any. The bytes go once parsed: the request holds its own copy.
    const absl::Status parsed = ParseRequestBytes(request_bytes_, &request_);
    const uint64_t request_bytes = request_bytes_.Length();
    request_bytes_.Clear();
    const std::string model = ModelNameOf(ctx_, Method::Model(request_));
    // Runs once: on this poller for a refusal, else on the device worker
    // that answered. The answer is written from `response_bytes_`, which
    // lives until the finish comes back.
    call_ = InferCall::Begin(context_.front_end, model, [this](const absl::Status& status) {
      absl::Status answer = status;
      if (answer.ok()) answer = SerializeAnswerBytes(response_, &response_bytes_);
      if (answer.ok()) {
        responder_.Finish(response_bytes_, grpc::Status::OK, &finished_);
      } else {
        responder_.FinishWithError(ToGrpcStatus(answer), &finished_);
      }
    });
    TraceInferCall(*call_, ctx_, Method::kRpc, model);
    if (!AdmitInferCall(*call_, ctx_, request_bytes)) return;
    if (!parsed.ok()) return call_->Refuse(parsed);
    // The input tensors alias `request_`'s bytes, which live as long.
    Method::Submit(context_, *call_, ctx_, model, request_, &response_);
  }

  std::shared_ptr<InferCall> call_;
  grpc::ByteBuffer request_bytes_;
  typename Method::Request request_;
  typename Method::Response response_;
  grpc::ByteBuffer response_bytes_;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> responder_{&ctx_};
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
    if (!ok) return infer_.OnReadDone(false);
    const absl::Status parsed = ParseRequestBytes(read_bytes_, reading_);
    read_bytes_.Clear();
    if (!parsed.ok()) return infer_.OnUnreadableRequest(parsed);
    infer_.OnReadDone(true);
  }
  void OnWriteDone(bool ok) override { infer_.OnWriteDone(ok); }

  void StartRead(inference::ModelInferRequest* request) override {
    reading_ = request;
    stream_.Read(&read_bytes_, &read_);
  }
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
                                           InferenceServiceImpl& v1_service, OpenInferenceService& open_inference)
    : context_(std::make_unique<Context>(front_end, v1_service, open_inference)) {
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
      AsyncUnaryInferCall<V1Infer>::Post(*context_, queue);
      AsyncUnaryInferCall<ModelInfer>::Post(*context_, queue);
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
