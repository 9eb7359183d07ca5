// The parsing and serialising of the raw gRPC methods' messages: a request
// that parses, bytes that do not (the status, and nothing half-read left),
// and an answer's bytes.
#include "service/grpc/message_bytes.h"

#include <gtest/gtest.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include <string>
#include <vector>

#include "inference/grpc_service.pb.h"
#include "infergate/v1/inference.pb.h"

namespace infergate {
namespace {

grpc::ByteBuffer BytesOf(const std::string& s) {
  grpc::Slice slice(s);
  return grpc::ByteBuffer(&slice, 1);
}

std::string StringOf(const grpc::ByteBuffer& bytes) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(bytes.Dump(&slices).ok());
  std::string s;
  for (const grpc::Slice& slice : slices) s.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  return s;
}

TEST(MessageBytes, ARequestParsesAndItsBytesStayAsTheyWere) {
  inference::ModelInferRequest sent;
  sent.set_model_name("mlp");
  sent.set_id("r7");
  sent.add_raw_input_contents(std::string(4096, '\x01'));
  const grpc::ByteBuffer bytes = BytesOf(sent.SerializeAsString());
  inference::ModelInferRequest got;
  ASSERT_TRUE(ParseRequestBytes(bytes, &got).ok());
  EXPECT_EQ(got.model_name(), "mlp");
  EXPECT_EQ(got.id(), "r7");
  EXPECT_EQ(got.raw_input_contents(0), sent.raw_input_contents(0));
  // The caller's bytes are read, not consumed.
  EXPECT_EQ(StringOf(bytes), sent.SerializeAsString());
}

TEST(MessageBytes, BytesThatAreNotTheRequestAreInvalidArgumentNamingTheMessage) {
  inference::ModelInferRequest got;
  got.set_id("left over");
  const absl::Status s = ParseRequestBytes(BytesOf("\xff\xff\xff\xff not a request"), &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "request: not a valid inference.ModelInferRequest message (it does not parse)");
  EXPECT_EQ(got.ByteSizeLong(), 0u) << "nothing half-read may reach an answer";

  v1::ListModelsRequest list;
  EXPECT_EQ(ParseRequestBytes(BytesOf("\x0a\xff\x01"), &list).message(),
            "request: not a valid infergate.v1.ListModelsRequest message (it does not parse)");
}

TEST(MessageBytes, AMessageOfNoBytesIsTheEmptyRequestButNoMessageIsNone) {
  inference::ServerLiveRequest got;
  EXPECT_TRUE(ParseRequestBytes(BytesOf(""), &got).ok());
  EXPECT_EQ(ParseRequestBytes(grpc::ByteBuffer(), &got).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MessageBytes, AnAnswerSerialisesToItsWireBytes) {
  inference::ModelInferResponse answer;
  answer.set_model_name("mlp");
  answer.add_raw_output_contents(std::string(100000, '\x02'));
  grpc::ByteBuffer bytes = BytesOf("stale");
  ASSERT_TRUE(SerializeAnswerBytes(answer, &bytes).ok());
  EXPECT_EQ(StringOf(bytes), answer.SerializeAsString());
}

}  // namespace
}  // namespace infergate
