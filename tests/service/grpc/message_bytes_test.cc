// The parsing and serialising of the raw gRPC methods' messages: a request
// that parses, bytes that do not (the status, and nothing half-read left),
// and an answer's bytes.
#include "service/grpc/message_bytes.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "inference/grpc_service.pb.h"
#include "infergate/v1/inference.pb.h"
#include "service/grpc/model_infer_answer_bytes.h"

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

// A ModelInfer answer whose outputs move into their own slices parses to
// the same message (the raw outputs in order, every other field), for
// outputs empty, small, and large enough for a two-byte and a three-byte
// length; the outputs' bytes are not copied.
TEST(MessageBytes, AModelInferAnswerWithItsOutputsMovedParsesToTheSameMessage) {
  inference::ModelInferResponse answer;
  answer.set_model_name("mlp");
  answer.set_model_version("3");
  answer.set_id("r9");
  (*answer.mutable_parameters())["triton_final_response"].set_bool_param(true);
  for (const char* name : {"a", "b", "c", "d"}) {
    inference::ModelInferResponse::InferOutputTensor* out = answer.add_outputs();
    out->set_name(name);
    out->set_datatype("FP32");
    out->add_shape(1);
  }
  answer.add_raw_output_contents(std::string(200, '\x01'));
  answer.add_raw_output_contents("");
  answer.add_raw_output_contents(std::string(70000, '\x02'));
  answer.add_raw_output_contents(std::string(3 << 20, '\x03'));
  const inference::ModelInferResponse expected = answer;
  const char* large_bytes = answer.raw_output_contents(3).data();
  grpc::ByteBuffer bytes = BytesOf("stale");
  ASSERT_TRUE(SerializeModelInferAnswer(answer, &bytes).ok());
  EXPECT_EQ(answer.raw_output_contents_size(), 0) << "the outputs moved out of the answer";
  inference::ModelInferResponse parsed;
  ASSERT_TRUE(ParseRequestBytes(bytes, &parsed).ok());
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
  EXPECT_EQ(bytes.Length(), expected.ByteSizeLong());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(bytes.Dump(&slices).ok());
  bool moved = false;
  for (const grpc::Slice& slice : slices) moved = moved || reinterpret_cast<const char*>(slice.begin()) == large_bytes;
  EXPECT_TRUE(moved) << "the 3 MiB output was copied, not moved";

  inference::ModelInferResponse none;
  ASSERT_TRUE(SerializeModelInferAnswer(none, &bytes).ok());
  EXPECT_EQ(bytes.Length(), 0u);
  ASSERT_TRUE(ParseRequestBytes(bytes, &parsed).ok());
  EXPECT_EQ(parsed.ByteSizeLong(), 0u);
}

// Outputs under 4 KiB are copied, not given slices of their own: a
// one-row answer (the demo mlp's is 40 bytes) is one slice, as the ordinary
// serialisation makes it, and it parses to the same message.
TEST(MessageBytes, AModelInferAnswerOfSmallOutputsIsOneSlice) {
  inference::ModelInferResponse answer;
  answer.set_model_name("mlp");
  answer.set_model_version("1");
  (*answer.mutable_parameters())["device"].set_string_param("cpu");
  for (const char* name : {"y", "z"}) {
    inference::ModelInferResponse::InferOutputTensor* out = answer.add_outputs();
    out->set_name(name);
    out->set_datatype("FP32");
    out->add_shape(1);
    out->add_shape(10);
  }
  answer.add_raw_output_contents(std::string(40, '\x05'));
  answer.add_raw_output_contents(std::string(4095, '\x06'));
  const inference::ModelInferResponse expected = answer;
  grpc::ByteBuffer bytes;
  ASSERT_TRUE(SerializeModelInferAnswer(answer, &bytes).ok());
  EXPECT_EQ(answer.raw_output_contents_size(), 0) << "the outputs let go of with the answer";
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(bytes.Dump(&slices).ok());
  EXPECT_EQ(slices.size(), 1u);
  inference::ModelInferResponse parsed;
  ASSERT_TRUE(ParseRequestBytes(bytes, &parsed).ok());
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
}

}  // namespace
}  // namespace infergate
