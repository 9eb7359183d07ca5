#pragma once
// absl::Status -> grpc::Status (the code numbers are the same by design).

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace infergate {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace infergate
