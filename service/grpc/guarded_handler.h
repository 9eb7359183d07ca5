#pragma once
// gRPC handlers under the rule that no exception ends the process: the
// body of every callback-API method runs inside GuardedUnary, which turns
// an exception that escapes it (std::bad_alloc included) into INTERNAL
// with the exception's message, logged and counted (caught_exception.h),
// and the server goes on serving.
//
// The call is finished with a reactor of gRPC's own when the body threw
// before handing one back. Bodies create their reactor first and finish it
// last (RawUnaryCall, InferCallReactor), so a throw between the two leaves
// that reactor unfinished and unreturned: gRPC never sees it and it is
// leaked, the price of not losing the process.
//
// Threading: whatever thread gRPC runs the handler on.

#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/strings/string_view.h"
#include "common/caught_exception.h"

namespace infergate {

template <typename Body>
grpc::ServerUnaryReactor* GuardedUnary(grpc::CallbackServerContext* ctx, absl::string_view method, Body&& body) {
  grpc::ServerUnaryReactor* reactor = nullptr;
  const absl::Status escaped = RunCatching(method, [&] { reactor = body(); });
  if (escaped.ok()) return reactor;
  grpc::ServerUnaryReactor* failed = ctx->DefaultReactor();
  failed->Finish(grpc::Status(grpc::StatusCode::INTERNAL, std::string(escaped.message())));
  return failed;
}

// The same for a synchronous-API method body returning grpc::Status.
template <typename Body>
grpc::Status GuardedSync(absl::string_view method, Body&& body) {
  grpc::Status result;
  const absl::Status escaped = RunCatching(method, [&] { result = body(); });
  if (escaped.ok()) return result;
  return grpc::Status(grpc::StatusCode::INTERNAL, std::string(escaped.message()));
}

}  // namespace infergate
