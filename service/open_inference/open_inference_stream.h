#pragma once
// ModelStreamInfer: one bidirectional stream carrying many inference
// requests at once. Each request read is submitted to the core straight
// away (the next read starts at once), and answered with the request's
// `id` and Triton's `triton_final_response: true` (a model here is never
// decoupled: each answer is its request's only and final one).
//
// Order: as Triton does for a non-decoupled model, answers leave in the
// order their requests arrived; an answer that is ready early waits for
// those before it. A request with the parameter `stream_order:
// "completion"` opts out: its answer is written as soon as it is ready,
// neither waiting for earlier answers nor holding back later ones (lower
// tail latency for a client that pairs answers by `id`).
//
// A client that sends without reading its answers is held back: while the
// stream holds kMaxHeldAnswers requests and answers not yet written, or
// kMaxHeldBytes of answers, it reads no more requests, until the client
// catches up. The answers it holds count in the in-flight budget (held,
// never refused: they are computed), so that they hold off new requests
// server-wide as requests do. A request that fails is answered in its place, in-band
// (`error_message`), and the stream stays open. The client cancelling the
// stream cancels every request still in flight.
//
// This class is the stream's logic, apart from the gRPC API under it: a
// Transport starts the stream's reads and writes and finishes it, and
// reports back each read's and write's end and the client's cancelling
// (completion_queue_server.h carries it on the completion-queue API).
//
// Threading: the transport's reports and the core's answers arrive on any
// thread; state is under one mutex (a CallbackLock: Answer takes it, so
// nothing may cancel or answer a request while holding it; the core
// checks), and the transport is called outside it. The stream finishes when
// the client has stopped sending and every request has been answered and
// written; the transport's Finish is the stream's last use of itself (the
// transport may free it then).
//
// gRPC allows one write outstanding per stream, and each write is a send on
// the socket of its own unless it carries the buffer hint. An answer written
// while more wait behind it carries the hint, so the answers of one batch
// leave in one send; the last of them, and the stream's first (whose initial
// metadata a buffered write would hold back), do not.

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/callback_lock.h"
#include "inference/grpc_service.grpc.pb.h"
#include "scheduler/model/inference_types.h"
#include "service/call/call_environment.h"
#include "service/call/infer_call.h"

namespace infergate {

// The in-band answer a stream gives in place of one it cannot give:
// `error_message` "CODE: message" of `status` (not OK), with the model,
// version and id of the request it answers.
inference::ModelStreamInferResponse InBandError(const std::string& model, const std::string& version,
                                                const std::string& id, const absl::Status& status);

class InferStream {
 public:
  // The gRPC stream under an InferStream. It has at most one read and one
  // write outstanding (the InferStream sees to that) and reports each one's
  // end to OnReadDone / OnWriteDone, on any thread, perhaps before the call
  // that started it has returned.
  class Transport {
   public:
    virtual ~Transport() = default;
    virtual void StartRead(inference::ModelInferRequest* request) = 0;
    // `response` stays alive until OnWriteDone.
    virtual void StartWrite(const inference::ModelStreamInferResponse* response, grpc::WriteOptions options) = 0;
    // Ends the stream with `status`; called once, as the InferStream's last
    // use of itself.
    virtual void Finish(const grpc::Status& status) = 0;
  };

  // Each request on the stream is an InferCall of `environment` (admitted,
  // counted and holding its size in the in-flight budget until it is
  // answered), traced with the trace context of the stream's metadata and
  // given the stream's deadline. `ctx` outlives this; so do `transport` and
  // `environment`.
  InferStream(Transport& transport, const CallEnvironment& environment, const grpc::ServerContextBase& ctx);
  InferStream(const InferStream&) = delete;
  InferStream& operator=(const InferStream&) = delete;

  // Requests in flight plus answers unwritten on one stream, and bytes of
  // unwritten answers, past which the stream stops reading.
  static constexpr size_t kMaxHeldAnswers = 256;
  static constexpr uint64_t kMaxHeldBytes = uint64_t{64} << 20;

  // Starts reading requests; `refusal` non-OK finishes the stream with it
  // at once instead (auth). Once, when the call has arrived.
  void Start(const absl::Status& refusal);
  // The transport's reports: a read or write ended (not ok: the client
  // closed its side, or the call ended), and the call was cancelled (by the
  // client, or its deadline passed).
  // `held_bytes` is what the parsed request holds (wire_scan.h): its
  // share of the budget while it is in flight (at least its size).
  void OnReadDone(bool ok, uint64_t held_bytes = 0);
  void OnWriteDone(bool ok);
  void OnCancel();
  // Instead of OnReadDone(true): the read brought a message that is not a
  // request (it does not parse). It is answered in its place with `why`,
  // in-band like any bad request, and reading goes on.
  void OnUnreadableRequest(const absl::Status& why);

 private:
  // Where a request's answer goes: the ticket names it while in flight;
  // `ordered` answers are written in `slot` order.
  struct Place {
    uint64_t ticket = 0;
    bool ordered = true;
    uint64_t slot = 0;
  };

  void StartNextRead();
  // Takes a read request's place in the stream and submits it; `ordered`
  // says whether its answer keeps request order, or (not OK) why it is
  // answered with that error instead.
  void Accept(std::shared_ptr<inference::ModelInferRequest> request, const absl::StatusOr<bool>& ordered,
              uint64_t held_bytes);
  // Admits and submits one request as `call`, whose end goes to Answer.
  // `refusal` non-OK answers it with that error instead (a bad stream
  // parameter).
  void Submit(InferCall& call, std::shared_ptr<inference::ModelInferRequest> request,
              std::shared_ptr<inference::ModelStreamInferResponse> response, const absl::Status& refusal,
              uint64_t held_bytes);
  void Answer(std::unique_ptr<inference::ModelStreamInferResponse> response, Place place);
  // Drops every answer not yet written (the client is gone).
  void DropUnwritten() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What is due next, decided under the lock by Progress and done outside
  // it by Act: resume reading, start the next write, or finish the stream.
  struct Step {
    bool read = false;
    inference::ModelStreamInferResponse* write = nullptr;
    grpc::WriteOptions options;
    std::optional<grpc::Status> finish;
  };
  Step Progress() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Must be the caller's last use of `this`: a finished stream may be
  // deleted by the time it returns.
  void Act(const Step& step);
  // Whether the stream holds as much as it may.
  bool Full() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Brings answers_held_ to held_bytes_, after held_bytes_ changed.
  void CountHeldAnswers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Transport& transport_;
  const CallEnvironment& environment_;
  const grpc::ServerContextBase& ctx_;
  Clock::time_point deadline_ = Clock::time_point::max();

  // The request being read: gRPC allows one read at a time, so only the
  // read path touches it, one read after another.
  std::shared_ptr<inference::ModelInferRequest> reading_;

  CallbackLock mu_;
  std::deque<std::unique_ptr<inference::ModelStreamInferResponse>> to_write_ ABSL_GUARDED_BY(mu_);
  // Ordered answers that are ready while an earlier one is not, by slot.
  std::map<uint64_t, std::unique_ptr<inference::ModelStreamInferResponse>> waiting_ ABSL_GUARDED_BY(mu_);
  uint64_t next_slot_ ABSL_GUARDED_BY(mu_) = 0;           // handed to the next ordered request
  uint64_t next_slot_to_write_ ABSL_GUARDED_BY(mu_) = 0;  // the ordered answer due next
  std::unique_ptr<inference::ModelStreamInferResponse> writing_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::shared_ptr<InferCall>> in_flight_ ABSL_GUARDED_BY(mu_);  // by ticket, until answered
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  int submitting_ ABSL_GUARDED_BY(mu_) = 0;                        // Submit calls still running
  uint64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;                   // of waiting_, to_write_ and writing_
  InflightBudget::Reservation answers_held_ ABSL_GUARDED_BY(mu_);  // held_bytes_, in the budget
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;                  // no read outstanding: the stream is Full()
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // The first answer (with the initial metadata) has been written.
  bool wrote_first_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace infergate
