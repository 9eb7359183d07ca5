#pragma once
// Requests and answers of the gRPC methods that take their messages as
// bytes (marked raw) and parse and serialise them here, instead of inside
// gRPC. gRPC 1.51 answers a request that does not parse with a status that
// misleads the client: UNIMPLEMENTED with no message on the callback API (as
// if the method did not exist), INTERNAL "Unable to parse request" on the
// completion-queue API, and on a stream it ends the reading as if the
// client had closed its side. The raw methods answer INVALID_ARGUMENT
// instead, naming the message the bytes should have been.

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "service/grpc/wire_scan.h"

namespace infergate {

// Parses `bytes` into `request` (cleared first). INVALID_ARGUMENT
// "request: not a valid <full message name> message (it does not parse)"
// when they are not one; `request` is then left cleared.
absl::Status ParseRequestBytes(const grpc::ByteBuffer& bytes, google::protobuf::Message* request);

// Scans `bytes` as a `type` message (wire_scan.h), in place: what parsing
// it will hold, or why it is refused unparsed.
absl::StatusOr<WireCost> ScanRequestBytes(const grpc::ByteBuffer& bytes, const google::protobuf::Descriptor& type,
                                          const WireScanLimits& limits);

// The INVALID_ARGUMENT above, for a request of `request`'s type that did
// not parse however it was read (a streamed unary method's failed Read).
absl::Status UnparsableRequest(const google::protobuf::Message& request);

// Serialises `answer` into `bytes`. INTERNAL, naming its size, for an
// answer protobuf cannot serialise (over its 2 GB limit); `bytes` is then
// empty.
absl::Status SerializeAnswerBytes(const google::protobuf::Message& answer, grpc::ByteBuffer* bytes);

}  // namespace infergate
