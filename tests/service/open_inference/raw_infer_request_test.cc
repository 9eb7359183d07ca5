// Triton's raw binary request (Inference-Header-Content-Length: 0): the
// input's name, datatype and shape deduced from the model's configuration,
// and Triton's refusals, as one table.

#include "service/open_inference/raw_infer_request.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "google/protobuf/text_format.h"

namespace infergate {
namespace {

inference::ModelConfig Config(const std::string& text) {
  inference::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config)) << text;
  return config;
}

struct Case {
  const char* what;
  const char* config;  // the model's configuration (text format)
  std::string body;
  // Expected: the input's name, datatype, shape and raw bytes; or a
  // refusal containing `refused`.
  const char* name;
  const char* datatype;
  std::vector<int64_t> shape;
  std::string raw;
  const char* refused;
};

TEST(RawInferRequest, DeducesTheOneInputFromTheConfigOrRefusesAsTritonDoes) {
  const std::string eight_floats(32, '\1');
  const std::string one_row_of_four(16, '\2');
  // clang-format off: a table, one row a line
  const Case cases[] = {
      {"batched, one variable dim: [1, bytes / 4]", R"(max_batch_size: 8 input { name: "INPUT0" data_type: TYPE_FP32 dims: [-1] })",
       eight_floats, "INPUT0", "FP32", {1, 8}, eight_floats, nullptr},
      {"not batched, fixed dims", R"(input { name: "x" data_type: TYPE_FP32 dims: [2, 4] })", eight_floats, "x", "FP32",
       {2, 4}, eight_floats, nullptr},
      {"a variable dim between fixed ones", R"(input { name: "x" data_type: TYPE_INT32 dims: [2, -1] })", eight_floats,
       "x", "INT32", {2, 4}, eight_floats, nullptr},
      {"a size the shape cannot hold is passed on (the decoder refuses it)",
       R"(input { name: "x" data_type: TYPE_FP32 dims: [4] })", std::string(15, '\0'), "x", "FP32", {4},
       std::string(15, '\0'), nullptr},
      {"an empty body: a zero-sized variable dim", R"(max_batch_size: 2 input { name: "x" data_type: TYPE_FP16 dims: [-1] })",
       "", "x", "FP16", {1, 0}, "", nullptr},
      {"BYTES with dims [1]: one string, its length prepended", R"(max_batch_size: 8 input { name: "INPUT0" data_type: TYPE_STRING dims: [1] })",
       "427", "INPUT0", "BYTES", {1, 1}, std::string("\3\0\0\0", 4) + "427", nullptr},
      {"BYTES with more than one element", R"(input { name: "INPUT0" data_type: TYPE_STRING dims: [-1] })", "427",
       nullptr, nullptr, {}, "", "For BYTE datatype raw input 'INPUT0', the model must have input shape [1]"},
      {"BYTES with dims [2]", R"(input { name: "INPUT0" data_type: TYPE_STRING dims: [2] })", "427", nullptr, nullptr,
       {}, "", "For BYTE datatype raw input 'INPUT0', the model must have input shape [1]"},
      {"two variable dims", R"(max_batch_size: 8 input { name: "INPUT0" data_type: TYPE_FP16 dims: [-1, -1] })",
       std::string(8, '\0'), nullptr, nullptr, {}, "",
       "The shape of the raw input 'INPUT0' can not be deduced because there are more than one variable-sized "
       "dimension"},
      {"three inputs", R"(input { name: "a" data_type: TYPE_FP32 dims: [8] } input { name: "b" data_type: TYPE_FP32 dims: [8] } input { name: "c" data_type: TYPE_FP32 dims: [8] })",
       std::string(96, '\0'), nullptr, nullptr, {}, "",
       "Raw request must only have 1 input (found 1) to be deduced but got 3 inputs in 'm' model configuration"},
      {"no input declared", "max_batch_size: 4", eight_floats, nullptr, nullptr, {}, "",
       "Raw request must only have 1 input (found 1) to be deduced but got 0 inputs in 'm' model configuration"},
      {"no datatype", R"(input { name: "x" dims: [8] })", eight_floats, nullptr, nullptr, {}, "",
       "the raw input 'x' has no datatype"},
      {"a datatype not served", R"(input { name: "x" data_type: TYPE_UINT16 dims: [-1] })", eight_floats, nullptr,
       nullptr, {}, "", "datatype UINT16, which is not served"},
      {"dims whose product overflows", R"(input { name: "x" data_type: TYPE_FP32 dims: [4294967296, 4294967296, -1] })",
       eight_floats, nullptr, nullptr, {}, "", "overflow"},
  };
  // clang-format on
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<RestInferRequest> r = ParseRawInferRequest(c.body, Config(c.config), "m", "3");
    if (c.refused != nullptr) {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(r.status().message().find(c.refused), std::string::npos) << r.status().message();
      continue;
    }
    ASSERT_TRUE(r.ok()) << r.status();
    const inference::ModelInferRequest& req = r->request;
    EXPECT_EQ(req.model_name(), "m");
    EXPECT_EQ(req.model_version(), "3");
    ASSERT_EQ(req.inputs_size(), 1);
    EXPECT_EQ(req.inputs(0).name(), c.name);
    EXPECT_EQ(req.inputs(0).datatype(), c.datatype);
    EXPECT_EQ(std::vector<int64_t>(req.inputs(0).shape().begin(), req.inputs(0).shape().end()), c.shape);
    ASSERT_EQ(req.raw_input_contents_size(), 1);
    EXPECT_EQ(req.raw_input_contents(0), c.raw);
    EXPECT_TRUE(r->all_outputs_binary) << "Triton answers a raw request's outputs in binary form";
    EXPECT_EQ(req.outputs_size(), 0) << "every output is answered";
  }
}

}  // namespace
}  // namespace infergate
