#pragma once
// gRPC handlers under the rule that no exception ends the process: the
// body of a synchronous-API method (ModelMesh's runtime service) runs
// inside GuardedSync, which turns an exception that escapes it
// (std::bad_alloc included) into INTERNAL with the exception's message,
// logged and counted (caught_exception.h), and the server goes on serving.
// (The completion-queue front end runs its handlers the same way itself.)
//
// Threading: whatever thread gRPC runs the handler on.

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/strings/string_view.h"
#include "common/caught_exception.h"

namespace infergate {

// Runs a synchronous-API method body returning grpc::Status.
template <typename Body>
grpc::Status GuardedSync(absl::string_view method, Body&& body) {
  grpc::Status result;
  const absl::Status escaped = RunCatching(method, [&] { result = body(); });
  if (escaped.ok()) return result;
  return grpc::Status(grpc::StatusCode::INTERNAL, std::string(escaped.message()));
}

}  // namespace infergate
