#pragma once
// A request as gRPC puts it on the wire, for load clients that replay
// pre-encoded bodies (h2load in bench/run.sh): the 5-byte message prefix
// (uncompressed flag, big-endian length) followed by the serialized message.
// Such a client cannot read grpc-status, so SendAndFrame first sends those
// exact bytes to the server and refuses to write a frame it did not answer OK.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "tools/connection.h"

namespace infergate::tools {

// `message` serialized once, prefixed as a gRPC length-prefixed message.
std::string GrpcFrame(const std::string& serialized);

// Sends `message`'s serialized bytes to `method` ("/package.Service/Method")
// as an opaque byte buffer, and returns its frame if the answer was OK; the
// error names the method and the server's status otherwise.
absl::StatusOr<std::string> SendAndFrame(const std::shared_ptr<grpc::Channel>& channel, const Connection& connection,
                                         const std::string& method, const google::protobuf::Message& message,
                                         int64_t timeout_ms);

}  // namespace infergate::tools
