#include "tools/grpc_frame.h"

#include <grpcpp/generic/generic_stub.h>

#include <chrono>

#include "absl/strings/str_cat.h"

namespace infergate::tools {

std::string GrpcFrame(const std::string& serialized) {
  const uint32_t n = static_cast<uint32_t>(serialized.size());
  std::string frame;
  frame.reserve(5 + serialized.size());
  frame.push_back('\0');  // not compressed
  for (int shift = 24; shift >= 0; shift -= 8) frame.push_back(static_cast<char>((n >> shift) & 0xff));
  frame += serialized;
  return frame;
}

absl::StatusOr<std::string> SendAndFrame(const std::shared_ptr<grpc::Channel>& channel, const Connection& connection,
                                         const std::string& method, const google::protobuf::Message& message,
                                         int64_t timeout_ms) {
  std::string serialized;
  if (!message.SerializeToString(&serialized)) return absl::InternalError("the request did not serialize");
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  Authorize(ctx, connection);
  grpc::Slice slice(serialized);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  call->StartCall();
  call->Finish(&response, &status, &cq);
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok) || !ok) return absl::UnavailableError(absl::StrCat(method, ": the call did not complete"));
  if (!status.ok()) {
    return absl::Status(
        static_cast<absl::StatusCode>(status.error_code()),
        absl::StrCat(method, " answered code ", static_cast<int>(status.error_code()), ": ", status.error_message()));
  }
  return GrpcFrame(serialized);
}

}  // namespace infergate::tools
