#pragma once
// absl::Status -> grpc::Status (the code numbers are the same by design),
// its message as a client may read it (client_text.h).

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "common/client_text.h"

namespace infergate {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), ForClients(s.message()));
}

}  // namespace infergate
