// The Open Inference request parameters infergate reads: placement
// (device, precision, fallback) and Triton's queueing parameters (priority,
// timeout), each refused with a message naming it when malformed.

#include "service/open_inference/open_inference_codec.h"

#include <gtest/gtest.h>

#include "service/open_inference/open_inference_api.h"

namespace infergate {
namespace {

inference::ModelInferRequest WithParameter(const std::string& key, const inference::InferParameter& value) {
  inference::ModelInferRequest request;
  request.set_model_name("mlp");
  (*request.mutable_parameters())[key] = value;
  return request;
}

inference::InferParameter Int64(int64_t v) {
  inference::InferParameter p;
  p.set_int64_param(v);
  return p;
}

inference::InferParameter Uint64(uint64_t v) {
  inference::InferParameter p;
  p.set_uint64_param(v);
  return p;
}

inference::InferParameter String(const std::string& v) {
  inference::InferParameter p;
  p.set_string_param(v);
  return p;
}

TEST(OpenInferenceCodec, PriorityAndTimeoutAreReadFromEitherIntegerType) {
  InferenceRequest out;
  ASSERT_TRUE(DecodeInferRequest(WithParameter("priority", Int64(2)), {}, &out).ok());
  EXPECT_EQ(out.priority, 2u);
  ASSERT_TRUE(DecodeInferRequest(WithParameter("priority", Uint64(1)), {}, &out).ok());
  EXPECT_EQ(out.priority, 1u);
  ASSERT_TRUE(DecodeInferRequest(WithParameter("timeout", Uint64(2500)), {}, &out).ok());
  EXPECT_EQ(out.timeout_us, 2500u);
  // The queue timeout is not the call's deadline.
  EXPECT_EQ(out.deadline, Clock::time_point::max());
  InferenceRequest plain;
  ASSERT_TRUE(DecodeInferRequest(WithParameter("device", String("cpu")), {}, &plain).ok());
  EXPECT_EQ(plain.priority, 0u);
  EXPECT_EQ(plain.timeout_us, 0u);
}

// An output named twice is refused before anything runs, naming both
// places (naming one a million times once made the answer a million copies).
// Precision names read the same on inference and on repository load and
// unload (load once took only upper case while inference took any case).
TEST(OpenInferenceCodec, PrecisionNamesParseTheSameForInferenceAndLoads) {
  for (const auto& [text, want] : std::vector<std::pair<std::string, Precision>>{{"", Precision::kAuto},
                                                                                 {"auto", Precision::kAuto},
                                                                                 {"FP16", Precision::kFp16},
                                                                                 {"fp16", Precision::kFp16},
                                                                                 {"Bf16", Precision::kBf16},
                                                                                 {"fp32", Precision::kFp32}}) {
    InferenceRequest out;
    ASSERT_TRUE(DecodeInferRequest(WithParameter("precision", String(text)), {}, &out).ok()) << text;
    EXPECT_EQ(out.precision, want) << text;
    google::protobuf::Map<std::string, inference::ModelRepositoryParameter> params;
    params["precision"].set_string_param(text);
    for (bool unload : {false, true}) {
      absl::StatusOr<LoadRequest> load = LoadRequestFromParameters("mlp", params, unload);
      ASSERT_TRUE(load.ok()) << text << ": " << load.status();
      EXPECT_EQ(load->precision, want) << text;
    }
  }
  InferenceRequest out;
  absl::Status s = DecodeInferRequest(WithParameter("precision", String("fp8")), {}, &out);
  EXPECT_NE(s.message().find("parameters.precision"), std::string::npos) << s;
  google::protobuf::Map<std::string, inference::ModelRepositoryParameter> params;
  params["precision"].set_string_param("fp8");
  EXPECT_NE(LoadRequestFromParameters("mlp", params, false).status().message().find("parameters.precision"),
            std::string::npos);
}

TEST(OpenInferenceCodec, AnOutputRequestedTwiceIsRefusedNamingBoth) {
  inference::ModelInferRequest request;
  request.set_model_name("mlp");
  request.add_outputs()->set_name("logits");
  request.add_outputs()->set_name("probs");
  InferenceRequest out;
  ASSERT_TRUE(DecodeInferRequest(request, {}, &out).ok());
  for (int i = 0; i < 1000; ++i) request.add_outputs()->set_name("logits");
  absl::Status s = DecodeInferRequest(request, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      s.message().find("output 'logits' already exists in request (outputs[2].name: also requested by outputs[0])"),
      std::string::npos)
      << s;
}

TEST(OpenInferenceCodec, TensorCountsAreCheckedBeforeAnyTensorIsDecoded) {
  inference::ModelInferRequest request;
  request.set_model_name("mlp");
  CodecLimits limits;
  limits.max_tensors = 16;
  for (int i = 0; i < 17; ++i) request.add_inputs();  // each one malformed: never looked at
  InferenceRequest out;
  absl::Status s = DecodeInferRequest(request, limits, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("inputs: 17 tensors; a request may carry at most 16"), std::string::npos) << s;
  request.clear_inputs();
  for (int i = 0; i < 17; ++i) request.add_outputs()->set_name("o" + std::to_string(i));
  s = DecodeInferRequest(request, limits, &out);
  EXPECT_NE(s.message().find("outputs: 17 tensors"), std::string::npos) << s;
}

TEST(OpenInferenceCodec, MalformedQueueingParametersAreNamed) {
  InferenceRequest out;
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, inference::InferParameter>>{{"priority", Int64(-1)},
                                                                      {"priority", String("high")},
                                                                      {"priority", Uint64(uint64_t{1} << 40)},
                                                                      {"timeout", Int64(-5)},
                                                                      {"timeout", String("1s")}}) {
    absl::Status s = DecodeInferRequest(WithParameter(key, value), {}, &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << key << " " << value.DebugString();
    EXPECT_NE(s.message().find("parameters." + key), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace infergate
