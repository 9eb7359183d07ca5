#include "scheduler/repository/triton/text_proto_json.h"

#include <gtest/gtest.h>

#include "scheduler/repository/model_config.h"

namespace infergate {
namespace {

TEST(TextProtoJsonTest, ReadsTritonsConfigsAsWritten) {
  absl::StatusOr<nlohmann::json> got = TextProtoToJson(R"(
    name: "resnet"   # a comment
    platform: "pytorch_libtorch"
    max_batch_size: 8
    input [
      { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] }
    ]
    output { name: "OUTPUT__0", data_type: TYPE_FP32, dims: [ 1000 ] label_filename: "labels.txt" }
    output < name: "OUTPUT__1" data_type: TYPE_INT64 dims: 1 >
    instance_group [ { count: 1 kind: KIND_GPU gpus: [ 0 ] } ]
    dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100 }
    parameters: { key: "INFERENCE_MODE" value: { string_value: "true" } }
    description: 'single' "joined"
    ratio: -1.5e3
  )");
  ASSERT_TRUE(got.ok()) << got.status();
  const nlohmann::json& j = *got;
  EXPECT_EQ(j["name"], "resnet");
  EXPECT_EQ(j["max_batch_size"], 8);
  ASSERT_TRUE(j["input"].is_array());
  EXPECT_EQ(j["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(j["input"][0]["dims"], nlohmann::json::array({3, 224, 224}));
  ASSERT_TRUE(j["output"].is_array());  // written twice: gathered
  EXPECT_EQ(j["output"].size(), 2u);
  EXPECT_EQ(j["output"][1]["dims"], 1);
  EXPECT_EQ(j["instance_group"][0]["kind"], "KIND_GPU");
  EXPECT_EQ(j["parameters"]["value"]["string_value"], "true");
  EXPECT_EQ(j["description"], "singlejoined");
  EXPECT_EQ(j["ratio"], -1500.0);
}

TEST(TextProtoJsonTest, RefusesBrokenTextWithItsLine) {
  for (const char* broken : {"name: \"open", "input { name: \"a\"", "x: [1, 2", "{", "a: }", "a b", "1a: 2"}) {
    absl::StatusOr<nlohmann::json> got = TextProtoToJson(broken);
    ASSERT_FALSE(got.ok()) << broken;
    EXPECT_NE(got.status().message().find("line "), absl::string_view::npos) << got.status();
  }
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "a {";
  EXPECT_FALSE(TextProtoToJson(deep).ok());
}

TEST(TextProtoJsonTest, ATritonConfigPbtxtIsReadAsInfergatesConfig) {
  absl::StatusOr<v1::ModelConfig> config = ParseModelConfig(R"(
    name: "m"
    platform: "pytorch_libtorch"
    max_batch_size: 8
    input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
    output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
    instance_group [ { kind: KIND_CPU } ]
    dynamic_batching { max_queue_delay_microseconds: 200 }
    version_policy: { latest: { num_versions: 2 } }
  )",
                                                            "m");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_batch_size(), 8u);
  ASSERT_EQ(config->inputs_size(), 1);
  EXPECT_EQ(config->inputs(0).name(), "INPUT__0");
  EXPECT_EQ(config->inputs(0).dtype(), v1::FLOAT32);
  EXPECT_EQ(config->dynamic_batching().max_queue_delay_us(), 200u);
  EXPECT_EQ(config->devices_size(), 1);
  EXPECT_EQ(config->version_policy().latest().num_versions(), 2u);

  absl::StatusOr<v1::ModelConfig> refused = ParseModelConfig(R"(
    platform: "pytorch_libtorch"
    sequence_batching { max_sequence_idle_microseconds: 5000000 }
  )",
                                                             "m");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("config.pbtxt.sequence_batching"), absl::string_view::npos)
      << refused.status();
  // infergate's own format still reports its own parse errors.
  absl::StatusOr<v1::ModelConfig> ours = ParseModelConfig("inputs { nme: \"x\" }", "m");
  ASSERT_FALSE(ours.ok());
  EXPECT_NE(ours.status().message().find("nme"), absl::string_view::npos) << ours.status();
}

}  // namespace
}  // namespace infergate
