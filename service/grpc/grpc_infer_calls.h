#pragma once
// The inference RPCs the completion-queue server (completion_queue_server.h)
// carries for the front ends, registered by each front end from its own
// folder: infergate.v1's Infer, the Open Inference Protocol's ModelInfer
// and ModelStreamInfer, TorchServe's Predictions. The server knows none of
// their message types: it reads a call's bytes once the intake gate has
// room, scans and charges them, then hands them to what the front end
// registered here, which parses, submits to the call path (infer_call.h)
// and serialises the answer.
//
//   GrpcInferCalls calls;
//   calls.AddUnary(UnaryInferMethod<Request, Response>{&kRpc, Model, Submit, Serialize});
//   calls.SetStream(InferStreamMethod{...});   // at most one stream method
//   CompletionQueueServer server(builder, threads, environment, methods, calls, intake);
//
// Threading: the table is built before the server starts and read-only
// after. A unary exchange is used by one call: parsed and submitted on the
// call's poller, its answer serialised on the thread that finished it. A
// stream's session and transport: see InferStreamSession.
// Ownership: the table owns what was registered; what a registration's
// functions capture (the front end's service) must outlive the server.

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "service/call/infer_call.h"
#include "service/grpc/call_context.h"
#include "service/grpc/message_bytes.h"

namespace infergate {

// One unary inference call's messages, whichever RPC it is: made for each
// call, it holds the request and the answer for the call's life.
class UnaryInferExchange {
 public:
  virtual ~UnaryInferExchange() = default;
  virtual const InferRpc& rpc() const = 0;
  virtual const google::protobuf::Descriptor& RequestType() const = 0;
  // Parses the request (INVALID_ARGUMENT naming the message otherwise);
  // the bytes may go once it returns.
  virtual absl::Status Parse(const grpc::ByteBuffer& bytes) = 0;
  // The model the request's body names.
  virtual const std::string& BodyModel() const = 0;
  // Submits the admitted call for `model`; its answer goes into this
  // exchange's answer (the input tensors alias the request's bytes, which
  // live as long as this).
  virtual void Submit(InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model) = 0;
  // Serialises the answer into `out` and lets the answer message go: from
  // then on only `out` holds it.
  virtual absl::Status SerializeAnswer(grpc::ByteBuffer* out) = 0;
};

// What a front end registers for one unary inference RPC.
template <typename Request, typename Response>
struct UnaryInferMethod {
  // Its name, for lookup and traces.
  const InferRpc* rpc = nullptr;
  // The model the request's body names.
  const std::string& (*model)(const Request& request) = nullptr;
  // Decodes the admitted request and submits it through `call`; the answer
  // goes into `response`. The request may be taken from (its bytes moved).
  std::function<void(InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model, Request& request,
                     Response* response)>
      submit;
  // Serialises the answer (it may move the answer's bytes out).
  absl::Status (*serialize)(Response& response, grpc::ByteBuffer* out) = nullptr;
};

// The exchange for a UnaryInferMethod; the method outlives it.
template <typename Request, typename Response>
class UnaryInferExchangeOf final : public UnaryInferExchange {
 public:
  explicit UnaryInferExchangeOf(const UnaryInferMethod<Request, Response>& method) : method_(method) {}

  const InferRpc& rpc() const override { return *method_.rpc; }
  const google::protobuf::Descriptor& RequestType() const override { return *Request::descriptor(); }
  absl::Status Parse(const grpc::ByteBuffer& bytes) override { return ParseRequestBytes(bytes, &request_); }
  const std::string& BodyModel() const override { return method_.model(request_); }
  void Submit(InferCall& call, const grpc::ServerContextBase& ctx, const std::string& model) override {
    method_.submit(call, ctx, model, request_, &response_);
  }
  absl::Status SerializeAnswer(grpc::ByteBuffer* out) override {
    const absl::Status serialized = method_.serialize(response_, out);
    Response().Swap(&response_);  // its outputs' bytes go now, not with the call
    return serialized;
  }

 private:
  const UnaryInferMethod<Request, Response>& method_;
  Request request_;
  Response response_;
};

// The server's side of one inference stream, as its session sees it. At
// most one read and one write are outstanding (the session sees to that);
// each one's end is reported to the session, on any thread, perhaps before
// the call that started it has returned.
class InferStreamTransport {
 public:
  virtual ~InferStreamTransport() = default;
  // Reads the next message into `request` once the intake gate has room:
  // scanned, charged and parsed by the server, then OnReadDone (or
  // OnUnreadableRequest) on the session. `request` lives until then.
  virtual void StartRead(google::protobuf::Message* request) = 0;
  // Writes `bytes` (a serialised answer; copied by reference to its
  // slices, not its data).
  virtual void StartWrite(const grpc::ByteBuffer& bytes, grpc::WriteOptions options) = 0;
  // Ends the stream with `status`; called once, as the session's last use
  // of the transport.
  virtual void Finish(const grpc::Status& status) = 0;
};

// The front end's side of one inference stream: what the server reports.
class InferStreamSession {
 public:
  virtual ~InferStreamSession() = default;
  // The stream has arrived: starts reading, or (`refusal` not OK: the
  // caller's token) finishes the stream with it at once.
  virtual void Start(const absl::Status& refusal) = 0;
  // A read ended: `ok` with the request parsed (`held_bytes`: what it
  // holds, its share of the budget while in flight), not `ok` when the
  // client closed its side or the call ended.
  virtual void OnReadDone(bool ok, uint64_t held_bytes) = 0;
  // Instead of OnReadDone(true): the message read is not a request.
  virtual void OnUnreadableRequest(const absl::Status& why) = 0;
  virtual void OnWriteDone(bool ok) = 0;
  // The client cancelled, or its deadline passed.
  virtual void OnCancel() = 0;
};

// What a front end registers for its inference stream method.
struct InferStreamMethod {
  const InferRpc* rpc = nullptr;
  // Posts a request for the next stream of the method on `queue`, with
  // `tag` for its arrival (the front end's registered async service; the
  // method is raw: its messages are bytes).
  std::function<void(grpc::ServerContext* ctx,
                     grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream,
                     grpc::ServerCompletionQueue* queue, void* tag)>
      post;
  // Opens one stream's session over `transport`; both, and `ctx`, live
  // until the transport is finished and every operation is back.
  std::function<std::unique_ptr<InferStreamSession>(InferStreamTransport& transport,
                                                    const grpc::ServerContextBase& ctx)>
      open;
};

// The registered inference RPCs.
class GrpcInferCalls {
 public:
  template <typename Request, typename Response>
  void AddUnary(UnaryInferMethod<Request, Response> method) {
    auto kept = std::make_shared<const UnaryInferMethod<Request, Response>>(std::move(method));
    AddUnaryExchange(*kept->rpc, [kept]() -> std::unique_ptr<UnaryInferExchange> {
      return std::make_unique<UnaryInferExchangeOf<Request, Response>>(*kept);
    });
  }
  // The stream method; at most one.
  void SetStream(InferStreamMethod method);

  // The exchange for a call of `method` as gRPC names it
  // ("/inference.GRPCInferenceService/ModelInfer"); null for a method that
  // is not a registered unary inference RPC.
  std::unique_ptr<UnaryInferExchange> ExchangeFor(absl::string_view method) const;
  // The stream method; null when none is registered.
  const InferStreamMethod* stream() const { return stream_ ? &*stream_ : nullptr; }

 private:
  void AddUnaryExchange(const InferRpc& rpc, std::function<std::unique_ptr<UnaryInferExchange>()> make);

  struct Unary {
    absl::string_view full_name;
    std::function<std::unique_ptr<UnaryInferExchange>()> make;
  };
  std::vector<Unary> unary_;
  std::optional<InferStreamMethod> stream_;
};

}  // namespace infergate
