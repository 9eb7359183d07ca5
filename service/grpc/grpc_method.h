#pragma once
// The gRPC methods the completion-queue front end (completion_queue_server.h)
// serves beside inference: what each needs before its message is read (the
// caller's token, a size limit, the request's type for the wire scan) and
// the handler that serves it once the message is in.
//
// Every method of the server's gRPC port but inference and ModelStreamInfer
// is one of these, registered by the front end it belongs to (health, the
// v1 listings and loads, the Open Inference Protocol's metadata and
// repository methods, TorchServe's Ping, reflection). The front end:
//   1. looks the method up (an unknown one: UNIMPLEMENTED, unread);
//   2. checks the caller's token for `role` from the call's metadata
//      (refused: UNAUTHENTICATED or PERMISSION_DENIED, unread);
//   3. reads the message once the intake gate (intake_gate.h) has room for
//      `max_request_bytes`, within the gate's deadline;
//   4. refuses a message over `max_request_bytes`, unparsed
//      (RESOURCE_EXHAUSTED naming the method's limit);
//   5. scans it (wire_scan.h) as a `request_type` and charges what parsing
//      it costs to the in-flight budget (refused: INVALID_ARGUMENT or
//      RESOURCE_EXHAUSTED, unparsed);
//   6. hands it to `serve` on the call's poller thread, which answers
//      through the GrpcServerCall now or later, from any thread.
// The call holds its message's charge until gRPC is done with it.
//
// Threading: the table is built before the server starts and read-only
// after; handlers must not block (a load answers from the loader's
// thread, not by waiting on the poller).

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "service/call/auth.h"

namespace infergate {

// One call of a GrpcMethod, as its handler sees it.
class GrpcServerCall {
 public:
  virtual ~GrpcServerCall() = default;
  // The call's metadata, deadline and peer.
  virtual const grpc::ServerContextBase& context() const = 0;
  // The request message that was read (valid during `serve`).
  virtual const grpc::ByteBuffer& request() const = 0;
  // Queues `message` to be written after those queued before; from any
  // thread, until Finish. A server-streaming or bidirectional method's
  // answers; a unary method answers with Answer.
  virtual void Write(const google::protobuf::Message& message) = 0;
  // Ends the call with `status` once the queued writes are written. Once;
  // from any thread. Later calls are ignored.
  virtual void Finish(const absl::Status& status) = 0;
  // Keeps `state` alive until the call is freed (a handler's parsed
  // request and answer, a watch's registration).
  virtual void Keep(std::shared_ptr<void> state) = 0;
  // Runs `cancelled` once if the client leaves or its deadline passes
  // before the call has finished (on the call's poller; it must not block).
  virtual void OnCancel(std::function<void()> cancelled) = 0;

  // A unary method's answer: `response` (when `status` is OK) and the
  // status. INTERNAL instead for an answer too large to serialise.
  void Answer(const absl::Status& status, const google::protobuf::Message& response);
};

// What a method whose request is a name or two (health, metadata,
// listings, settings) takes at most.
inline constexpr uint64_t kSmallRequestBytes = 16 << 10;

struct GrpcMethod {
  enum class Shape {
    kUnary,         // one request, one answer
    kServerStream,  // one request, answers until it finishes (health Watch)
    kBidi,          // `serve` runs for each request as it is read (reflection)
  };
  Shape shape = Shape::kUnary;
  // The token the caller needs, checked before the message is read;
  // nullopt: none (health, liveness, TorchServe's Ping).
  std::optional<TokenAuth::Role> role;
  // The largest request message it takes.
  uint64_t max_request_bytes = kSmallRequestBytes;
  // The request's message type, for the wire scan.
  const google::protobuf::Descriptor* request_type = nullptr;
  // Serves one request (see above).
  std::function<void(GrpcServerCall& call)> serve;
};

// The methods by full name as gRPC gives it ("/inference.GRPCInferenceService/ServerLive").
class GrpcMethods {
 public:
  // Adds `method` as `/<service>/<name>`.
  void Add(absl::string_view service, absl::string_view name, GrpcMethod method);
  // Null for a method not served.
  const GrpcMethod* Find(absl::string_view full_name) const;
  // The services that have a method here ("inference.GRPCInferenceService").
  std::vector<std::string> Services() const;

 private:
  std::map<std::string, GrpcMethod, std::less<>> methods_;
};

// Adds `serve`, a method of `service`'s class that takes a GrpcServerCall,
// as a unary method of `service_name`: the common case of a front end's
// Register.
template <typename Service>
void AddUnaryMethod(GrpcMethods& methods, absl::string_view service_name, absl::string_view name,
                    std::optional<TokenAuth::Role> role, uint64_t max_request_bytes,
                    const google::protobuf::Descriptor* request_type, Service* service,
                    void (Service::*serve)(GrpcServerCall&)) {
  GrpcMethod method;
  method.role = role;
  method.max_request_bytes = max_request_bytes;
  method.request_type = request_type;
  method.serve = [service, serve](GrpcServerCall& call) { (service->*serve)(call); };
  methods.Add(service_name, name, std::move(method));
}

}  // namespace infergate
