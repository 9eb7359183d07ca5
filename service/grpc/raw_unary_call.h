#pragma once
// One call of a unary method served on gRPC's callback API with its
// messages as bytes (the method marked raw), so that the server parses the
// request itself and a request that does not parse is answered
// INVALID_ARGUMENT, naming the message it should have been (message_bytes.h),
// where gRPC 1.51 would answer UNIMPLEMENTED with no message.
//
//   grpc::ServerUnaryReactor* Service::ModelReady(grpc::CallbackServerContext* ctx,
//                                                  const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {
//     auto* call = new RawUnaryCall<ModelReadyRequest, ModelReadyResponse>(*in, out, CheckToken(...));
//     if (!call->parsed()) return call;                  // answered: refused, or unparsable
//     ... read call->request(), fill call->response() ...
//     call->Answer(status);                              // now or later
//     return call;
//   }
//
// Answer serialises the response (when the status is OK) into gRPC's
// response bytes, then finishes the call; it is called once, on the
// handler's thread or later from any other (a load finishing on a loader
// thread).
//
// Ownership: gRPC holds the reactor from the handler's return; it deletes
// itself once gRPC is done with the call (OnDone), so the request and the
// response live until then.

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "service/grpc/message_bytes.h"

namespace infergate {

// What every raw unary reactor does: finish with an answer's bytes.
class RawUnaryReactor : public grpc::ServerUnaryReactor {
 public:
  // Finishes the call with `status`; when it is OK, the response goes with
  // it (INTERNAL instead if it is too large to serialise). Once.
  void Answer(const absl::Status& status);

  void OnDone() override { delete this; }
  // gRPC runs OnDone and OnCancel on the thread that completes the call
  // (a device worker that answered it, or gRPC's own), instead of handing
  // each to its executor thread: one wake-up and context switch less per
  // call. Both are short and block on nothing (OnDone frees the call; an
  // inference call's OnCancel cancels its request, answering it at once
  // when it is still queued), and neither is called with a lock of ours
  // held (Answer never is). gRPC 1.51 marks this hook internal; its own
  // finish-only reactor uses it.
  bool InternalInlineable() override { return true; }

 protected:
  // `out` is gRPC's response buffer for the call; `response` the message
  // Answer sends (it may be a member not yet constructed: it is read only
  // by Answer).
  RawUnaryReactor(grpc::ByteBuffer* out, const google::protobuf::Message& response) : out_(out), response_(response) {}
  ~RawUnaryReactor() override = default;

 private:
  grpc::ByteBuffer* const out_;
  const google::protobuf::Message& response_;
};

template <typename Request, typename Response>
class RawUnaryCall final : public RawUnaryReactor {
 public:
  // Parses `in` once the caller is `admitted` (its token checked, where
  // the method needs one); a caller refused, or a request that does not
  // parse, is answered at once, with the refusal or INVALID_ARGUMENT.
  RawUnaryCall(const grpc::ByteBuffer& in, grpc::ByteBuffer* out, const absl::Status& admitted = absl::OkStatus())
      : RawUnaryReactor(out, response_) {
    const absl::Status parsed = admitted.ok() ? ParseRequestBytes(in, &request_) : admitted;
    parsed_ = parsed.ok();
    if (!parsed_) Answer(parsed);
  }

  // False when the call is answered: the caller was refused, or the request
  // did not parse.
  bool parsed() const { return parsed_; }
  const Request& request() const { return request_; }
  Response* response() { return &response_; }

 private:
  Request request_;
  Response response_;
  bool parsed_ = false;
};

}  // namespace infergate
