#pragma once
// One call of a unary method the completion-queue front end serves
// (grpc_method.h), with its request parsed into a `Request` and its answer
// built in a `Response`. The server parses the request itself, so one that
// does not parse is answered INVALID_ARGUMENT, naming the message it should
// have been (message_bytes.h).
//
//   void Service::ModelReady(GrpcServerCall& server_call) {
//     auto* call = RawUnaryCall<ModelReadyRequest, ModelReadyResponse>::Start(server_call);
//     if (call == nullptr) return;                       // answered: unparsable
//     ... read call->request(), fill call->response() ...
//     call->Answer(status);                              // now or later
//   }
//
// Answer serialises the response (when the status is OK) and finishes the
// call; it is called once, on the handler's thread or later from any other
// (a load finishing on a loader thread).
//
// Ownership: the GrpcServerCall keeps the RawUnaryCall (Keep) until gRPC is
// done with the call, so the request and the response live until then.

#include <memory>

#include "absl/status/status.h"
#include "service/grpc/grpc_method.h"
#include "service/grpc/message_bytes.h"

namespace infergate {

template <typename Request, typename Response>
class RawUnaryCall {
 public:
  // Parses `call`'s request once the caller is `admitted` (a check of the
  // parsed request, where the method's own needs one); a caller refused,
  // or a request that does not parse, is answered at once, with the
  // refusal or INVALID_ARGUMENT, and null returned.
  static RawUnaryCall* Start(GrpcServerCall& call) {
    auto exchange = std::shared_ptr<RawUnaryCall>(new RawUnaryCall(call));
    if (absl::Status parsed = ParseRequestBytes(call.request(), &exchange->request_); !parsed.ok()) {
      call.Finish(parsed);
      return nullptr;
    }
    call.Keep(exchange);
    return exchange.get();
  }

  const Request& request() const { return request_; }
  Response* response() { return &response_; }
  const grpc::ServerContextBase& context() const { return call_.context(); }
  // Finishes the call with `status`; when it is OK, the response goes with
  // it. Once.
  void Answer(const absl::Status& status) { call_.Answer(status, response_); }

 private:
  explicit RawUnaryCall(GrpcServerCall& call) : call_(call) {}

  GrpcServerCall& call_;
  Request request_;
  Response response_;
};

}  // namespace infergate
