#include "service/grpc/completion_queue_server.h"

#include <grpcpp/alarm.h>
#include <grpcpp/generic/async_generic_service.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/caught_exception.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/thread_name.h"
#include "scheduler/execution/drain_refusal.h"
#include "service/call/infer_call.h"
#include "service/call/intake_gate.h"
#include "service/grpc/call_context.h"
#include "service/grpc/grpc_infer_calls.h"
#include "service/grpc/grpc_method.h"
#include "service/grpc/message_bytes.h"
#include "service/grpc/status_convert.h"
#include "service/grpc/wire_scan.h"

namespace infergate {

struct CompletionQueueServer::Context {
  Context(const CallEnvironment& environment, const GrpcMethods& methods, const GrpcInferCalls& infer_calls,
          const IntakeOptions& intake)
      : environment(environment),
        methods(methods),
        infer_calls(infer_calls),
        max_message_bytes(intake.max_message_bytes),
        gate(environment.budget(), GateOptions(intake)) {}

  static IntakeGate::Options GateOptions(const IntakeOptions& intake) {
    IntakeGate::Options o;
    o.max_message_bytes = intake.max_message_bytes;
    o.max_waiting = kMaxWaitingReads;
    o.min_rate = intake.min_receive_rate;
    o.max_reads_per_address = intake.max_reads_per_address;
    return o;
  }

  // What parsing an inference request may hold: its tensors and strings
  // within the wire limits.
  WireScanLimits InferScanLimits() const {
    WireScanLimits limits;
    const CodecLimits& codec = environment.limits();
    // Tensors, and each tensor's parameters: a request carries at most
    // max_tensors inputs and as many outputs.
    limits.max_repeated_messages = std::max(codec.max_tensors, 64);
    limits.max_string_elements = codec.max_string_elements;
    return limits;
  }

  const CallEnvironment& environment;
  const GrpcMethods& methods;
  const GrpcInferCalls& infer_calls;
  const uint64_t max_message_bytes;
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

using Context = CompletionQueueServer::Context;

// One call on a completion queue, from posting to freeing. Every operation
// it starts carries one of its tags, and the queue's poller hands each tag
// back to Handle: the call arrived (or, not ok, the server shut down first),
// a read or write ended, its answer or status was written, a timer went
// off, and gRPC is done with it (which also tells of a client that
// cancelled, or a deadline that passed). Each operation started counts
// until its tag is back; the call is freed once none is outstanding and
// both its finish and gRPC's done notice have come back.
class AsyncCall {
 public:
  enum class Event { kArrived, kRead, kWritten, kFinished, kDone, kRetry, kReadTimer };
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
        outstanding_ = 2;  // its finish and gRPC's done notice
        Begin();
        return;
      case Event::kRead:
        reading_ = false;
        if (read_timer_set_) read_timer_.Cancel();
        if (read_abandoned_) {
          read_abandoned_ = false;
          OnAbandonedReadDone();
        } else {
          OnReadDone(ok);
        }
        break;
      case Event::kWritten: OnWriteDone(ok); break;
      case Event::kRetry: {
        // Woken by the gate (a slot came free: the alarm was cancelled), or
        // its time came.
        const bool woken = retry_->Fired();
        if ((ok || woken) && waiting_ && !gone_) AskToRead(/*again=*/true);
        break;
      }
      case Event::kReadTimer:
        read_timer_set_ = false;
        if (rearm_read_timer_) {
          // That was an earlier read's timer: the current read's is set now.
          rearm_read_timer_ = false;
          if (reading_ && !read_abandoned_) ArmReadTimer();
        } else if (ok && reading_ && !read_abandoned_ && !gone_) {
          OnReadOverdue();
        }
        break;
      case Event::kDone:
        gone_ = ctx_.IsCancelled();
        if (gone_) {
          OnCancelled();
          if (waiting_) {
            // Never read: out of line, and the call ends here.
            context_.gate.Leave(this);
            waiting_ = false;
            retry_->Cancel();
            OnLeftUnread();
          }
        }
        OnDoneNotice(gone_);
        break;
      case Event::kFinished: break;
    }
    if (--outstanding_ > 0) return;
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
  // A read or write ended.
  virtual void OnReadDone(bool /*ok*/) {}
  virtual void OnWriteDone(bool /*ok*/) {}
  // The intake gate admitted a read: `ticket_` holds its share; start it
  // (StartRead).
  virtual void StartAdmittedRead() = 0;
  // The read found no room in time (`waited`), or the line full: a unary
  // call is refused unread (true); a stream waits on (false).
  virtual bool RefuseWithoutRoom(std::chrono::steady_clock::duration waited) = 0;
  // The client left while the call waited to read: it ends.
  virtual void OnLeftUnread() = 0;
  // A read passed its deadline and the gate would not extend it: the call
  // is refused with `why`; the read's end comes back later and is dropped.
  virtual void RefuseOverdueRead(const absl::Status& why) = 0;
  // gRPC is done with the call (`cancelled`: the client went away, or its
  // deadline passed); after OnCancelled.
  virtual void OnDoneNotice(bool /*cancelled*/) {}
  // The largest message the next read may bring (the method's limit).
  virtual uint64_t MaxMessageBytes() const { return context_.max_message_bytes; }
  // Asks the gate for the next read's turn (a stream's read is its own).
  virtual IntakeGate::Turn AskGate() {
    return context_.gate.Ask(this, peer_, MaxMessageBytes(), &ticket_, [retry = retry_] { retry->Wake(); });
  }

  // Starts a read of one message once the intake gate has room for it:
  // now, or from a retry alarm on this call's queue.
  void AskToRead(bool again = false) {
    if (peer_.empty()) peer_ = ctx_.peer();
    if (!again) asked_ = std::chrono::steady_clock::now();
    const IntakeGate::Turn turn = AskGate();
    if (turn == IntakeGate::Turn::kAdmitted) {
      waiting_ = false;
      retry_wait_ = kFirstRetry;
      return StartAdmittedRead();
    }
    const auto waited = turn == IntakeGate::Turn::kRefused ? std::chrono::steady_clock::duration::max()
                                                           : std::chrono::steady_clock::now() - asked_;
    if (RefuseWithoutRoom(waited)) {
      context_.gate.Leave(this);
      waiting_ = false;
      return;
    }
    // Asks again after a short wait, longer as it goes on (to 8 ms).
    waiting_ = true;
    ++outstanding_;
    retry_->Set(queue_, retry_wait_, &retry_tag_);
    retry_wait_ = std::min(retry_wait_ * 2, kLastRetry);
  }

  // Starts reading one message into `into`, with the ticket's deadline
  // (from StartAdmittedRead).
  void BeginRead(grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>& stream, grpc::ByteBuffer* into) {
    ++outstanding_;
    reading_ = true;
    ArmReadTimer();
    stream.Read(into, &read_);
  }
  // Counts a write about to be started, on any thread.
  void CountOperation() { ++outstanding_; }
  // What a read refused past its deadline brought goes unread.
  virtual void OnAbandonedReadDone() {}

  static constexpr std::chrono::microseconds kFirstRetry{500};
  static constexpr std::chrono::microseconds kLastRetry{8000};

  Context& context_;
  grpc::ServerCompletionQueue* const queue_;
  // Generic: unary calls are taken unread (the intake gate decides when
  // their message is read); a stream's context is the same.
  grpc::GenericServerContext ctx_;
  Tag arrived_{this, Event::kArrived};
  Tag read_{this, Event::kRead};
  Tag written_{this, Event::kWritten};
  Tag finished_{this, Event::kFinished};
  Tag done_{this, Event::kDone};
  Tag retry_tag_{this, Event::kRetry};
  Tag read_timer_tag_{this, Event::kReadTimer};
  // The read's place at the gate and share of the budget; the connection
  // it came by, as gRPC names it (the gate keeps its history).
  IntakeGate::Ticket ticket_;
  std::string peer_;

 private:
  void ArmReadTimer() {
    if (ticket_.deadline() == IntakeGate::Clock::time_point::max()) return;
    // An alarm is set again only once its last event is back.
    if (read_timer_set_) {
      rearm_read_timer_ = true;
      return;
    }
    const auto left = ticket_.deadline() - IntakeGate::Clock::now();
    ++outstanding_;
    read_timer_set_ = true;
    read_timer_.Set(queue_, std::chrono::system_clock::now() + left, &read_timer_tag_);
  }
  // The read's deadline passed with the read unfinished: a fast read may
  // go on as a room read; any other is refused, its room and slot given
  // back at once.
  void OnReadOverdue() {
    if (context_.gate.Overstay(&ticket_)) return ArmReadTimer();
    const absl::Status why = context_.gate.Overdue(ticket_);
    ticket_ = IntakeGate::Ticket();
    read_abandoned_ = true;
    RefuseOverdueRead(why);
  }
  // Operations started and not yet back, plus the finish and the done
  // notice; writes and finishes may start on other threads.
  std::atomic<int> outstanding_{0};
  bool waiting_ = false;                         // waiting for room to read
  bool reading_ = false;                         // a read is outstanding
  bool read_abandoned_ = false;                  // refused past its deadline: its end is dropped
  std::chrono::steady_clock::time_point asked_;  // when it first asked to read
  bool gone_ = false;                            // the client cancelled, or its deadline passed
  bool read_timer_set_ = false;
  bool rearm_read_timer_ = false;  // the timer's pending event is an earlier read's
  std::chrono::microseconds retry_wait_ = kFirstRetry;
  // The alarm a call waiting to read sleeps on between asks, shared with the
  // wake function it leaves at the intake gate: the gate wakes the call
  // (on any thread, outside its lock) when a slot comes free by cancelling
  // the alarm, whose event then comes back at once. Shared, so that a wake
  // that comes after the call is gone finds it alive (and not set).
  class RetryAlarm {
   public:
    // Sets the alarm to go off on `queue` with `tag` after `wait`, or at
    // once when woken since its last event.
    void Set(grpc::ServerCompletionQueue* queue, std::chrono::microseconds wait, Tag* tag) {
      MutexLock lock(mu_);
      const auto now = std::chrono::system_clock::now();
      set_ = true;
      alarm_.Set(queue, std::exchange(woken_, false) ? now : now + wait, tag);
    }
    // The gate's wake (any thread): the alarm goes off now, or at once
    // when next set.
    void Wake() { Cancel(/*woken=*/true); }
    // The call ends unread: the alarm goes off now, not woken.
    void Cancel() { Cancel(/*woken=*/false); }
    // Its event came back: whether it was woken.
    bool Fired() {
      MutexLock lock(mu_);
      set_ = false;
      return std::exchange(woken_, false);
    }

   private:
    void Cancel(bool woken) {
      MutexLock lock(mu_);
      woken_ = woken;
      if (set_) alarm_.Cancel();
    }
    Mutex mu_;
    grpc::Alarm alarm_ ABSL_GUARDED_BY(mu_);
    bool set_ ABSL_GUARDED_BY(mu_) = false;
    bool woken_ ABSL_GUARDED_BY(mu_) = false;
  };
  const std::shared_ptr<RetryAlarm> retry_ = std::make_shared<RetryAlarm>();
  grpc::Alarm read_timer_;
};

// A call taken as a generic call, its message unread: a unary inference
// call (an RPC of the inference table: Infer, ModelInfer or TorchServe's
// Predictions) or a method of the table (grpc_method.h: health, metadata, listings, loads, reflection).
// The caller's token and the drain switch are checked from its metadata
// first; its message is read only once the intake gate has room for it,
// scanned on the wire and charged at what parsing it costs, then parsed
// and served. An inference call is admitted (holding the gate's room,
// shrunk to the message) and submitted; its answer is written by the
// device worker that computed it (or by the poller, for a call refused
// early). A table method is served on the poller and answers from any
// thread.
class AsyncGenericCall final : public AsyncCall, private GrpcServerCall {
 public:
  // Posts a request for the next generic call on `queue`, unless stopping.
  static void Post(Context& context, grpc::ServerCompletionQueue* queue) {
    if (!context.Track()) return;
    auto* call = new AsyncGenericCall(context, queue);
    call->ctx_.AsyncNotifyWhenDone(&call->done_);
    context.generic.RequestCall(&call->ctx_, &call->stream_, queue, queue, &call->arrived_);
  }

 private:
  AsyncGenericCall(Context& context, grpc::ServerCompletionQueue* queue) : AsyncCall(context, queue) {}

  void PostAnother() override { Post(context_, queue_); }
  void OnCancelled() override {
    if (call_) call_->Cancel();
    std::function<void()> cancelled;
    {
      MutexLock lock(mu_);
      if (!finish_started_) cancelled = std::move(on_cancel_);
    }
    if (cancelled) cancelled();
  }

  void Begin() override {
    exchange_ = context_.infer_calls.ExchangeFor(ctx_.method());
    if (exchange_) {
      // Refused before a byte of the message is read: a caller without a
      // valid token, or a server that drains.
      if (absl::Status token = CheckToken(context_.environment.auth(), ctx_, TokenAuth::Role::kInference);
          !token.ok()) {
        return EndUnread(token);
      }
      if (context_.environment.draining()) {
        if (InferCallObserver* o = context_.environment.observer()) o->OnAdmissionRejection(RejectionReason::kDraining);
        return EndUnread(DrainingRefusal());
      }
      return AskToRead();
    }
    method_ = context_.methods.Find(ctx_.method());
    if (method_ == nullptr) {
      return FinishNow(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                    absl::StrCat("method ", ctx_.method().substr(0, 128), " is not served")));
    }
    if (method_->role) {
      if (absl::Status token = CheckToken(context_.environment.auth(), ctx_, *method_->role); !token.ok()) {
        return FinishNow(ToGrpcStatus(token));
      }
    }
    AskToRead();
  }

  // A bidirectional method's stream waits for its next request as long as
  // its client likes, as an inference stream does.
  IntakeGate::Turn AskGate() override {
    if (method_ == nullptr || method_->shape != GrpcMethod::Shape::kBidi || !served_) return AsyncCall::AskGate();
    context_.gate.AskForStream(&ticket_);
    return IntakeGate::Turn::kAdmitted;
  }
  uint64_t MaxMessageBytes() const override {
    return method_ != nullptr ? std::min(method_->max_request_bytes, context_.max_message_bytes)
                              : context_.max_message_bytes;
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
    // A call whose read takes a slot waits for the slot, not for room: it
    // waits on (its deadline and its client bound it).
    const bool line_full = waited == std::chrono::steady_clock::duration::max();
    if (!line_full && (waited < kMaxReadWait || context_.gate.WaitsForASlotOnly(peer_, MaxMessageBytes()))) {
      return false;
    }
    if (InferCallObserver* o = context_.environment.observer())
      o->OnAdmissionRejection(RejectionReason::kInflightBytes);
    if (exchange_) {
      EndUnread(context_.gate.Refusal());
    } else {
      FinishNow(ToGrpcStatus(context_.gate.Refusal()));
    }
    return true;
  }
  void OnLeftUnread() override {
    if (exchange_) return EndUnread(absl::CancelledError("the client left while its request waited to be read"));
    FinishNow(grpc::Status::CANCELLED);
  }
  void RefuseOverdueRead(const absl::Status& why) override {
    if (exchange_) {
      if (InferCallObserver* o = context_.environment.observer())
        o->OnAdmissionRejection(RejectionReason::kInflightBytes);
      return EndUnread(why);
    }
    Finish(why);
  }
  static constexpr std::chrono::milliseconds kMaxReadWait{250};

  void StartAdmittedRead() override { BeginRead(stream_, &request_bytes_); }

  void OnReadDone(bool ok) override {
    if (method_ != nullptr) return OnMethodReadDone(ok);
    if (!ok) {
      ticket_ = IntakeGate::Ticket();
      // No message came: the client half-closed without one, or went away
      // (a load tool ending its run resets the streams it still has open;
      // gRPC answers a message over the size limit itself). Which of the
      // two is known only once gRPC's done notice comes, so the call is
      // answered now and counted then (OnDoneNotice): a client that left
      // as CANCELLED, not as a bad request.
      no_message_ = true;
      FinishNow(ToGrpcStatus(NoMessage()));
      return;
    }
    // The message is scanned before it is parsed: what parsing it will
    // hold is charged (with the message) before the parser runs, and a
    // message over the wire limits is refused unparsed.
    const uint64_t request_bytes = request_bytes_.Length();
    absl::StatusOr<WireCost> cost =
        ScanRequestBytes(request_bytes_, exchange_->RequestType(), context_.InferScanLimits());
    const uint64_t charge = cost.ok() ? std::max(request_bytes, cost->parsed_bytes) : request_bytes;
    const absl::Status charged = context_.gate.Read(peer_, charge, &ticket_);
    absl::Status parsed = cost.status();
    if (parsed.ok() && charged.ok()) parsed = exchange_->Parse(request_bytes_);
    // The bytes go once parsed: the request holds its own copy.
    request_bytes_.Clear();
    const std::string model = ModelNameOf(ctx_, parsed.ok() ? exchange_->BodyModel() : std::string());
    BeginCall(model);
    TraceInferCall(*call_, ctx_, exchange_->rpc(), model);
    if (!charged.ok()) return call_->Refuse(charged);
    if (!call_->AdmitHolding([this] { return Authorization(ctx_); }, std::move(ticket_.room()))) return;
    if (!parsed.ok()) return call_->Refuse(parsed);
    exchange_->Submit(*call_, ctx_, model);
  }

  absl::Status NoMessage() const {
    return absl::InvalidArgumentError(
        absl::StrCat(exchange_ ? exchange_->rpc().method : ctx_.method(), ": no request message"));
  }
  // Counts and traces a call that ended with no message (answered already).
  void OnDoneNotice(bool cancelled) override {
    if (!no_message_ || !exchange_) return;
    call_ = InferCall::Begin(context_.environment, ModelNameOf(ctx_, ""), [](const absl::Status&) {});
    call_->Refuse(cancelled ? absl::CancelledError("the client left before its request message came") : NoMessage());
  }

  // Runs once: on this poller for a refusal, else on the device worker
  // that answered. The answer is written from `response_bytes_`, which
  // lives until the finish comes back.
  void BeginCall(const std::string& model) {
    call_ = InferCall::Begin(context_.environment, model, [this](const absl::Status& status) {
      absl::Status answer = status;
      if (answer.ok()) answer = exchange_->SerializeAnswer(&response_bytes_);
      if (answer.ok()) {
        // The answer is held until gRPC has written it: the call's share of
        // the budget counts it meanwhile (InferCall::Submit), so that new
        // reads wait for it to go.
        stream_.WriteAndFinish(response_bytes_, grpc::WriteOptions(), grpc::Status::OK, &finished_);
      } else {
        stream_.Finish(ToGrpcStatus(answer), &finished_);
      }
    });
  }

  // --- A method of the table.

  void OnMethodReadDone(bool ok) {
    if (!ok) {
      ticket_ = IntakeGate::Ticket();
      // The client closed its side: a bidirectional method's stream ends
      // once its answers are written; any other had no request.
      if (method_->shape == GrpcMethod::Shape::kBidi && served_) return Finish(absl::OkStatus());
      return FinishNow(
          ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(ctx_.method().substr(1), ": no request message"))));
    }
    const uint64_t bytes = request_bytes_.Length();
    const uint64_t limit = MaxMessageBytes();
    if (bytes > limit) {
      ticket_ = IntakeGate::Ticket();
      request_bytes_.Clear();
      return Finish(absl::ResourceExhaustedError(absl::StrCat("request: ", bytes, " bytes, more than the ", limit,
                                                              " bytes ", ctx_.method().substr(1), " takes")));
    }
    WireScanLimits limits;
    limits.max_repeated_messages = 1024;
    limits.max_string_elements = 1 << 16;
    absl::StatusOr<WireCost> cost = ScanRequestBytes(request_bytes_, *method_->request_type, limits);
    if (!cost.ok()) {
      ticket_ = IntakeGate::Ticket();
      request_bytes_.Clear();
      return Finish(cost.status());
    }
    // The message's charge is the call's until gRPC is done with it.
    if (absl::Status charged = context_.gate.Read(peer_, std::max(bytes, cost->parsed_bytes), &ticket_);
        !charged.ok()) {
      ticket_ = IntakeGate::Ticket();
      request_bytes_.Clear();
      if (InferCallObserver* o = context_.environment.observer())
        o->OnAdmissionRejection(RejectionReason::kInflightBytes);
      return Finish(charged);
    }
    held_.push_back(std::move(ticket_.room()));
    ticket_ = IntakeGate::Ticket();
    served_ = true;
    const absl::Status escaped = RunCatching(ctx_.method().substr(1), [&] { method_->serve(*this); });
    request_bytes_.Clear();
    if (!escaped.ok()) return Finish(escaped);
    // A bidirectional method reads its next request once this one is served.
    if (method_->shape != GrpcMethod::Shape::kBidi) return;
    {
      MutexLock lock(mu_);
      if (finish_status_ || finish_started_) return;
    }
    AskToRead();
  }
  void OnAbandonedReadDone() override { request_bytes_.Clear(); }

  // GrpcServerCall:
  const grpc::ServerContextBase& context() const override { return ctx_; }
  const grpc::ByteBuffer& request() const override { return request_bytes_; }
  void Keep(std::shared_ptr<void> state) override {
    MutexLock lock(mu_);
    kept_.push_back(std::move(state));
  }
  void OnCancel(std::function<void()> cancelled) override {
    MutexLock lock(mu_);
    on_cancel_ = std::move(cancelled);
  }
  void Write(const google::protobuf::Message& message) override {
    grpc::ByteBuffer bytes;
    absl::Status serialized = SerializeAnswerBytes(message, &bytes);
    if (!serialized.ok()) return Finish(serialized);
    InflightBudget::Reservation held;
    if (InflightBudget* budget = context_.environment.budget()) held = budget->Hold(bytes.Length());
    bool start = false;
    {
      MutexLock lock(mu_);
      if (finish_status_ || finish_started_) return;
      writes_.push_back({std::move(bytes), std::move(held)});
      start = !writing_;
      writing_ = writing_ || start;
    }
    if (start) StartNextWrite();
  }
  void Finish(const absl::Status& status) override {
    const grpc::Status finish = ToGrpcStatus(status);
    bool now = false;
    {
      MutexLock lock(mu_);
      if (finish_status_ || finish_started_) return;
      finish_status_ = finish;
      now = !writing_;
      finish_started_ = now;
    }
    if (now) stream_.Finish(finish, &finished_);
  }
  // Finishes at once a call nothing was written on (on the poller).
  void FinishNow(const grpc::Status& status) {
    {
      MutexLock lock(mu_);
      if (finish_started_) return;
      finish_started_ = true;
    }
    stream_.Finish(status, &finished_);
  }

  // Starts the first queued write (with `writing_` set by the caller).
  void StartNextWrite() {
    grpc::ByteBuffer* next;
    {
      MutexLock lock(mu_);
      next = &writes_.front().bytes;
    }
    CountOperation();
    stream_.Write(*next, &written_);
  }
  void OnWriteDone(bool ok) override {
    bool more = false;
    std::optional<grpc::Status> finish;
    {
      MutexLock lock(mu_);
      writes_.pop_front();
      if (!ok) {
        writes_.clear();  // the client is gone
        if (!finish_status_) finish_status_ = grpc::Status::CANCELLED;
      }
      more = !writes_.empty();
      writing_ = more;
      if (!more && finish_status_ && !finish_started_) {
        finish_started_ = true;
        finish = finish_status_;
      }
    }
    if (more) return StartNextWrite();
    if (finish) stream_.Finish(*finish, &finished_);
  }

  // Inference:
  std::shared_ptr<InferCall> call_;
  bool no_message_ = false;  // the read ended without a message (answered, counted at the done notice)
  std::unique_ptr<UnaryInferExchange> exchange_;
  grpc::GenericServerAsyncReaderWriter stream_{&ctx_};
  grpc::ByteBuffer request_bytes_;
  grpc::ByteBuffer response_bytes_;

  // A method of the table:
  const GrpcMethod* method_ = nullptr;
  bool served_ = false;                            // a request was handed to the method (on the poller)
  std::vector<InflightBudget::Reservation> held_;  // its requests' charges
  struct Queued {
    grpc::ByteBuffer bytes;
    InflightBudget::Reservation held;
  };
  Mutex mu_;
  std::deque<Queued> writes_ ABSL_GUARDED_BY(mu_);  // the first is being written while writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> finish_status_ ABSL_GUARDED_BY(mu_);  // Finish was asked for
  bool finish_started_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::shared_ptr<void>> kept_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_cancel_ ABSL_GUARDED_BY(mu_);
};

// An inference stream (the stream method of grpc_infer_calls.h: the Open
// Inference Protocol's ModelStreamInfer) over the queue: its reads, writes
// and finish are started here, and their ends come back to the front end's
// session through the poller. A read (and the request it submits) runs on
// the poller; a write starts on whichever thread made an answer ready,
// mostly the device worker that computed it.
//
// The stream's messages travel as bytes (the method is raw) and are parsed
// here, so that a message that is not a request is answered in-band,
// INVALID_ARGUMENT, in its place; gRPC's own parsing would end its read as
// if the client had closed its side, and the stream OK.
class AsyncStreamInferCall final : public AsyncCall, private InferStreamTransport {
 public:
  // Posts a request for the next stream on `queue`, unless stopping.
  static void Post(Context& context, grpc::ServerCompletionQueue* queue) {
    if (!context.Track()) return;
    auto* call = new AsyncStreamInferCall(context, queue);
    call->ctx_.AsyncNotifyWhenDone(&call->done_);
    context.infer_calls.stream()->post(&call->ctx_, &call->stream_, queue, &call->arrived_);
  }

 private:
  AsyncStreamInferCall(Context& context, grpc::ServerCompletionQueue* queue)
      : AsyncCall(context, queue), session_(context.infer_calls.stream()->open(*this, ctx_)) {}

  void PostAnother() override { Post(context_, queue_); }
  void Begin() override { session_->Start(CheckToken(context_.environment.auth(), ctx_, TokenAuth::Role::kInference)); }
  void OnCancelled() override { session_->OnCancel(); }
  void OnReadDone(bool ok) override {
    // The read's share of the budget goes once the message is parsed: the
    // stream's own admission of the request counts it from there.
    if (!ok) {
      ticket_ = IntakeGate::Ticket();
      return session_->OnReadDone(false, 0);
    }
    // Scanned before it is parsed, and charged meanwhile at what parsing
    // it holds; then the stream's admission of the request counts it.
    const uint64_t bytes = read_bytes_.Length();
    absl::StatusOr<WireCost> cost =
        ScanRequestBytes(read_bytes_, *reading_->GetDescriptor(), context_.InferScanLimits());
    const uint64_t held = cost.ok() ? std::max(bytes, cost->parsed_bytes) : bytes;
    absl::Status parsed = context_.gate.Read(peer_, held, &ticket_);
    if (parsed.ok()) parsed = cost.status();
    if (parsed.ok()) parsed = ParseRequestBytes(read_bytes_, reading_);
    read_bytes_.Clear();
    ticket_ = IntakeGate::Ticket();
    if (!parsed.ok()) return session_->OnUnreadableRequest(parsed);
    session_->OnReadDone(true, held);
  }
  void OnWriteDone(bool ok) override { session_->OnWriteDone(ok); }

  // Each message of a stream is read once the intake gate has room for it;
  // a stream that finds the line full waits on (its messages are in order,
  // one at a time) rather than failing.
  void StartRead(google::protobuf::Message* request) override {
    reading_ = request;
    AskToRead();
  }
  void StartAdmittedRead() override { BeginRead(stream_, &read_bytes_); }
  // An open stream waits for its next request as long as its client likes:
  // its read takes no slot and has no deadline (intake_gate.h).
  IntakeGate::Turn AskGate() override {
    context_.gate.AskForStream(&ticket_);
    return IntakeGate::Turn::kAdmitted;
  }
  bool RefuseWithoutRoom(std::chrono::steady_clock::duration) override { return false; }
  // A stream whose request did not come in time ends: its requests in
  // flight are cancelled as when the client cancels.
  void RefuseOverdueRead(const absl::Status& why) override {
    LOG_WARNING << context_.infer_calls.stream()->rpc->method << " from " << peer_ << ": " << why.message()
                << "; the stream is cancelled";
    ctx_.TryCancel();
  }
  void OnAbandonedReadDone() override {
    read_bytes_.Clear();
    session_->OnReadDone(false, 0);
  }
  void OnLeftUnread() override { session_->OnReadDone(false, 0); }
  void StartWrite(const grpc::ByteBuffer& bytes, grpc::WriteOptions options) override {
    write_bytes_ = bytes;
    CountOperation();
    stream_.Write(write_bytes_, options, &written_);
  }
  void Finish(const grpc::Status& status) override { stream_.Finish(status, &finished_); }

  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_{&ctx_};
  // The read outstanding: its bytes, and the request they are parsed into.
  grpc::ByteBuffer read_bytes_;
  google::protobuf::Message* reading_ = nullptr;
  // The write outstanding (one at a time).
  grpc::ByteBuffer write_bytes_;
  // Last: it goes first, while the transport it uses is whole.
  std::unique_ptr<InferStreamSession> session_;
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

CompletionQueueServer::CompletionQueueServer(grpc::ServerBuilder& builder, int threads,
                                             const CallEnvironment& environment, const GrpcMethods& methods,
                                             const GrpcInferCalls& infer_calls, const IntakeOptions& intake)
    : context_(std::make_unique<Context>(environment, methods, infer_calls, intake)) {
  builder.RegisterAsyncGenericService(&context_->generic);
  for (int i = 0; i < threads; ++i) queues_.push_back(builder.AddCompletionQueue());
}

CompletionQueueServer::~CompletionQueueServer() {
  if (!stopped_) Stop();
}

void CompletionQueueServer::Start() {
  started_ = true;
  for (size_t i = 0; i < queues_.size(); ++i) {
    grpc::ServerCompletionQueue* queue = queues_[i].get();
    for (int n = 0; n < kPostedPerMethod; ++n) {
      // Generic calls: every method but the inference stream.
      AsyncGenericCall::Post(*context_, queue);
      AsyncGenericCall::Post(*context_, queue);
      if (context_->infer_calls.stream() != nullptr) AsyncStreamInferCall::Post(*context_, queue);
    }
    pollers_.emplace_back([queue, i] {
      NameThisThread(absl::StrCat("grpc poller ", i));
      Poll(queue);
    });
  }
}

void CompletionQueueServer::Stop() {
  stopped_ = true;
  {
    UniqueMutexLock lock(context_->mu);
    context_->stopping = true;
    // The server's shutdown returns the posted requests (not ok); calls in
    // progress end as the core answers them.
    context_->no_calls_left.wait(lock.native(),
                                 [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return context_->live_calls == 0; });
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
