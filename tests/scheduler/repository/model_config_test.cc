#include "scheduler/repository/model_config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

TEST(ModelConfig, ParsesAFullConfig) {
  auto c = ParseModelConfig(R"(
    # comment
    name: "mlp"
    description: "demo"
    max_batch_size: 64
    inputs { name: "x" dtype: FLOAT32 dims: [256] }
    outputs { name: "logits" dtype: FLOAT32 dims: [10] }
    dynamic_batching { max_queue_delay_us: 500 preferred_batch_sizes: [16, 32] }
    allowed_devices: [CPU, CUDA]
    precision: BF16
    pinned: true
    warmup: true
  )",
                            "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_batch_size(), 64u);
  ASSERT_EQ(c->inputs_size(), 1);
  EXPECT_EQ(c->inputs(0).dims(0), 256);
  EXPECT_EQ(c->dynamic_batching().preferred_batch_sizes_size(), 2);
  EXPECT_EQ(c->allowed_devices_size(), 2);
  EXPECT_EQ(c->precision(), v1::BF16);
  EXPECT_TRUE(c->pinned());
  EXPECT_TRUE(c->warmup());
}

TEST(ModelConfig, EmptyConfigTakesTheFolderName) {
  auto c = ParseModelConfig("", "plain");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name(), "plain");
  EXPECT_EQ(c->max_batch_size(), 0u);
}

// A folder served under a name given from outside (ModelMesh's model id):
// the config's own name, in either format, gives way to it.
TEST(ModelConfig, ServedAsReplacesTheConfigsName) {
  EXPECT_FALSE(ParseModelConfig("name: \"saved\"", "id__isvc-1").ok());
  auto c = ParseModelConfig("name: \"saved\" max_batch_size: 4", "id__isvc-1", ConfigNaming::kServedAs);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name(), "id__isvc-1");
  EXPECT_EQ(c->max_batch_size(), 4u);
  auto triton = ParseModelConfig(
      "name: \"saved\"\nplatform: \"pytorch_libtorch\"\nmax_batch_size: 8\n"
      "input [ { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [ 4 ] } ]\n",
      "id__isvc-2", ConfigNaming::kServedAs);
  ASSERT_TRUE(triton.ok()) << triton.status();
  EXPECT_EQ(triton->name(), "id__isvc-2");
  EXPECT_EQ(triton->max_batch_size(), 8u);
  // Everything else is checked as ever.
  auto broken = ParseModelConfig("name: \"saved\" max_batch_size: -1", "id", ConfigNaming::kServedAs);
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);
}

// A Triton config keeps its text, so ModelConfig can answer with its own
// fields; infergate's format may not set it.
TEST(ModelConfig, ATritonConfigKeepsItsTextAndOnlyIt) {
  const std::string triton = "platform: \"pytorch_libtorch\"\nmax_batch_size: 2\n";
  auto c = ParseModelConfig(triton, "t");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->triton_config_text(), triton);
  EXPECT_TRUE(ParseModelConfig("max_batch_size: 2", "m")->triton_config_text().empty());
  auto refused = ParseModelConfig("triton_config_text: \"x\"", "m");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("triton_config_text"), std::string::npos) << refused.status();
}

struct Broken {
  const char* text;
  const char* expect_in_message;
};

TEST(ModelConfig, BrokenConfigsNameTheField) {
  const Broken cases[] = {
      {"max_batch_size: -3", "line 1"},
      {"nonsense_field: 1", "nonsense_field"},
      {"inputs { name: \"x\" dtype: FLOAT32 ", "line"},
      {"name: \"other\"", "does not match"},
      {"inputs { dtype: FLOAT32 dims: [1] }", "inputs[0].name"},
      {"inputs { name: \"x\" dims: [1] }", "inputs[0].dtype"},
      {"inputs { name: \"x\" dtype: FLOAT32 } inputs { name: \"x\" dtype: INT64 }", "inputs[1].name"},
      {"inputs { name: \"x\" dtype: FLOAT32 dims: [4, 0] }", "inputs[0].dims[1]"},
      {"outputs { name: \"y\" dtype: FLOAT32 dims: [-2] }", "outputs[0].dims[0]"},
      {"inputs { name: \"x\" dtype: FLOAT32 dims: [1,1,1,1,1,1,1,1,1] }", "inputs[0].dims"},
      {"max_batch_size: 8 dynamic_batching { preferred_batch_sizes: [16] }", "preferred_batch_sizes[0]"},
      {"inputs { name: \"x\" dtype: NOT_A_TYPE }", "NOT_A_TYPE"},
      {"devices: [\"cuda:1\", \"tpu:0\"]", "devices[1]"},
      {"devices: [\"auto\"]", "devices[0]"},
      {"accelerator_instances: 65", "accelerator_instances"},
      // Triton's ModelConfig carries it as an int32: it would read negative.
      {"max_batch_size: 2147483648", "max_batch_size: 2147483648 is more than 2147483647"},
  };
  for (const Broken& b : cases) {
    auto c = ParseModelConfig(b.text, "m");
    ASSERT_FALSE(c.ok()) << b.text;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << b.text;
    EXPECT_NE(c.status().message().find(b.expect_in_message), absl::string_view::npos)
        << b.text << " -> " << c.status();
  }
}

TEST(ModelConfig, DTypeWireMappingRoundTrips) {
  for (DType d : kAllDTypes) {
    EXPECT_EQ(DTypeFromProto(DTypeToProto(d)), d);
  }
  EXPECT_FALSE(DTypeFromProto(0).has_value());
  EXPECT_FALSE(DTypeFromProto(99).has_value());
}

}  // namespace
}  // namespace infergate

namespace infergate {
namespace {

// Triton's rules for dims and reshape, one row each, written from its model
// configuration documentation (a reshape's element count is the dims';
// variable dimensions pair up trunk by trunk; an empty reshape means a
// scalar per batch row, which a model without batching cannot have; no
// size below 1 but -1), with the words Triton refuses them in.
TEST(ModelConfig, TritonsReshapeRulesWithTritonsWords) {
  struct Row {
    int max_batch_size;
    const char* tensor;   // the input or output, in Triton's text format
    const char* refusal;  // "" when served
  };
  const Row rows[] = {
      {4, R"(input [{ name: "x" data_type: TYPE_FP32 dims: [ 1, 3, 2 ] reshape { shape: [ 5 ] } }])",
       "model input 'x' has different size for dims and reshape for m"},
      {4, R"(input [{ name: "x" data_type: TYPE_FP32 dims: [ 1, 3, 2 ] reshape { shape: [ 6 ] } }])", ""},
      {0, R"(input [{ name: "x" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } }])",
       "model input 'x' cannot have empty reshape for non-batching model as scalar tensors are not supported for m"},
      {4, R"(input [{ name: "x" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } }])", ""},
      {0, R"(input [{ name: "x" data_type: TYPE_FP32 dims: [ 2, -1 ] reshape { shape: [ 2, 2 ] } }])",
       "model input 'x' has different size for dims and reshape for m"},
      {4, R"(input [{ name: "x" data_type: TYPE_FP32 dims: [ 2, -1 ] reshape { shape: [ 2, -1, -1 ] } }])",
       "model input 'x' has different number of variable-size dimensions for dims and reshape for m"},
      {4, R"(input [{ name: "x" data_type: TYPE_FP32 dims: [ 2, 4, -1, 6 ] reshape { shape: [ 8, -1, 1, 6 ] } }])", ""},
      {4, R"(input [{ name: "x" data_type: TYPE_FP32 dims: [ 2, 4, -1, 6 ] reshape { shape: [ 4, -1, 2, 6 ] } }])",
       "model input 'x' has different size for dims and reshape for m"},
      {4, R"(input [{ name: "x" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape { shape: [ 0 ] } }])",
       "model input 'x' reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension for m"},
      {8, R"(input [{ name: "x" data_type: TYPE_FP32 dims: [ 1, 0, 28 ] }])",
       "model input 'x' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for m"},
      {0, R"(output [{ name: "y" data_type: TYPE_FP32 dims: [ 2, -1 ] reshape { shape: [ 1, -1, 2 ] } }])",
       "model output 'y' has different size for dims and reshape for m"},
      {0, R"(output [{ name: "y" data_type: TYPE_FP32 dims: [ 1000 ] reshape { shape: [ 1, 1000, 1, 1 ] } }])", ""},
      {0, R"(input [{ name: "x" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 224, 224 ] }])", ""},
      // Counts past 2^60: a product that wrapped around (2^64 reads 0, 2^64 + 16 reads 16) could match.
      {0,
       R"(input [{ name: "x" data_type: TYPE_FP32 dims: [ 4294967296, 4294967297 ] reshape { shape: [ 4294967296 ] } }])",
       "model input 'x' dims hold more than 2^60 elements for m"},
      {0,
       R"(input [{ name: "x" data_type: TYPE_FP32 dims: [ 16 ] reshape { shape: [ 4294967296, 4294967296, 16 ] } }])",
       "model input 'x' reshape holds more than 2^60 elements for m"},
      {0, R"(input [{ name: "x" data_type: TYPE_FP32 format: FORMAT_NHWC dims: [ 224, 224 ] }])",
       "model input NHWC/NCHW require 3 dims"},
  };
  for (const Row& row : rows) {
    const std::string text =
        absl::StrCat("platform: \"pytorch_libtorch\"\nmax_batch_size: ", row.max_batch_size, "\n", row.tensor, "\n");
    absl::StatusOr<v1::ModelConfig> config = ParseModelConfig(text, "m");
    if (std::string(row.refusal).empty()) {
      EXPECT_TRUE(config.ok()) << row.tensor << ": " << config.status();
    } else {
      ASSERT_FALSE(config.ok()) << row.tensor;
      EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(config.status().message().find(row.refusal), std::string::npos)
          << row.tensor << ": " << config.status();
    }
  }
}

// What the reader keeps of a Triton tensor: the reshape (a scalar one
// too) and the format, echoed in the configuration clients read.
TEST(ModelConfig, ATritonReshapeAndFormatAreRead) {
  absl::StatusOr<v1::ModelConfig> config = ParseModelConfig(R"(name: "densenet"
platform: "pytorch_libtorch"
max_batch_size: 0
input [ { name: "data_0" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 224, 224 ]
          reshape { shape: [ 1, 3, 224, 224 ] } } ]
output [ { name: "fc6_1" data_type: TYPE_FP32 dims: [ 1000 ] reshape { shape: [ 1, 1000, 1, 1 ] } } ]
)",
                                                            "densenet");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->inputs(0).format(), v1::FORMAT_NCHW);
  EXPECT_EQ(
      std::vector<int64_t>(config->inputs(0).reshape().shape().begin(), config->inputs(0).reshape().shape().end()),
      (std::vector<int64_t>{1, 3, 224, 224}));
  EXPECT_TRUE(config->outputs(0).has_reshape());
  absl::StatusOr<v1::ModelConfig> scalar = ParseModelConfig(R"(platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [ ] } } ]
)",
                                                            "s");
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE(scalar->inputs(0).has_reshape());
  EXPECT_EQ(scalar->inputs(0).reshape().shape_size(), 0);
}

}  // namespace
}  // namespace infergate
