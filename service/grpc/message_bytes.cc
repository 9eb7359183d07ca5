#include "service/grpc/message_bytes.h"

#include <grpcpp/impl/codegen/proto_utils.h>

#include <vector>

#include "absl/strings/str_cat.h"

namespace infergate {

absl::Status ParseRequestBytes(const grpc::ByteBuffer& bytes, google::protobuf::Message* request) {
  // gRPC's parser consumes the buffer it reads: it reads a copy, which
  // shares the bytes' slices.
  grpc::ByteBuffer readable(bytes);
  if (grpc::SerializationTraits<google::protobuf::Message>::Deserialize(&readable, request).ok()) {
    return absl::OkStatus();
  }
  request->Clear();  // no half-read id or name may reach an answer
  return UnparsableRequest(*request);
}

absl::StatusOr<WireCost> ScanRequestBytes(const grpc::ByteBuffer& bytes, const google::protobuf::Descriptor& type,
                                          const WireScanLimits& limits) {
  std::vector<grpc::Slice> slices;
  if (!bytes.Dump(&slices).ok()) return ScanWire(type, absl::string_view(), limits);
  std::vector<absl::string_view> chunks;
  chunks.reserve(slices.size());
  for (const grpc::Slice& slice : slices) {
    chunks.emplace_back(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return ScanWire(type, absl::MakeConstSpan(chunks), limits);
}

absl::Status UnparsableRequest(const google::protobuf::Message& request) {
  return absl::InvalidArgumentError(
      absl::StrCat("request: not a valid ", request.GetDescriptor()->full_name(), " message (it does not parse)"));
}

absl::Status SerializeAnswerBytes(const google::protobuf::Message& answer, grpc::ByteBuffer* bytes) {
  bytes->Clear();
  bool own_buffer = false;
  if (grpc::SerializationTraits<google::protobuf::Message>::Serialize(answer, bytes, &own_buffer).ok()) {
    return absl::OkStatus();
  }
  bytes->Clear();
  return absl::InternalError(
      absl::StrCat("the answer (", answer.ByteSizeLong(), " bytes) is too large for one message"));
}

}  // namespace infergate
