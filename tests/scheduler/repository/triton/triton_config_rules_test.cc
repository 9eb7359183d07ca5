// Triton's rules for a model configuration, one row per rule: a config
// fragment Triton refuses and the words it refuses it with. Each config is
// read the way a repository's config.pbtxt is (ParseModelConfig), so the
// row also proves the rule runs before infergate's own reading (which
// would otherwise say "not supported" for the fields it does not serve).
// Beside them, sound configs with the same fields: the rules do not refuse
// what Triton accepts.

#include "scheduler/repository/triton/triton_config_rules.h"

#include <gtest/gtest.h>

#include "scheduler/repository/model_config.h"
#include "scheduler/repository/triton/text_proto_json.h"

namespace infergate {
namespace {

// A model "m" with one batched INT32 input "INPUT" and output "OUTPUT"; `extra` is added.
std::string Config(const std::string& extra, const std::string& io = "") {
  return R"(name: "m" platform: "pytorch_libtorch" max_batch_size: 8
    input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
    output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
  )" + io +
         extra;
}

struct Rule {
  const char* rule;
  std::string config;
  const char* field;   // infergate's pointer to the field, before Triton's words
  const char* triton;  // Triton's words
};

std::vector<Rule> Rules() {
  const std::string scatter = R"(batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE )";
  return {
      {"max_batch_size is not negative",
       R"(name: "m" platform: "pytorch_libtorch" max_batch_size: -2 input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ])",
       "max_batch_size", "'max_batch_size' must be non-negative value for m"},
      {"an input has a data_type", R"(name: "m" platform: "pytorch_libtorch" input [ { name: "input" dims: [ 1 ] } ])",
       "input[0].data_type", "model input 'input' must specify 'data_type'"},
      {"an output has a data_type",
       R"(name: "m" platform: "pytorch_libtorch" input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]
          output [ { name: "y" dims: [ 1 ] } ])",
       "output[0].data_type", "model output 'y' must specify 'data_type'"},
      {"a batch input has one source",
       Config(R"(batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_FP32 } ])"),
       "batch_input[0].source_input", "batch input kind 'BATCH_ELEMENT_COUNT' expects 1 source input, got 0"},
      {"a batch input has no more than one source",
       Config(R"(batch_input [ { kind: BATCH_MAX_ELEMENT_COUNT_AS_SHAPE target_name: "N" data_type: TYPE_INT32
                                 source_input: [ "INPUT", "INPUT" ] } ])"),
       "batch_input[0].source_input",
       "batch input kind 'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE' expects 1 source input, got 2"},
      {"a batch input's source is an input",
       Config(R"(batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "N" data_type: TYPE_FP32
                                 source_input: "UNKNOWN_INPUT" } ])"),
       "batch_input[0].source_input", "unknown source input name 'UNKNOWN_INPUT'"},
      {"a batch input is INT32 or FP32",
       Config(
           R"(batch_input [ { kind: BATCH_ITEM_SHAPE target_name: "N" data_type: TYPE_FP16 source_input: "INPUT" } ])"),
       "batch_input[0].data_type", "batch input data type must be TYPE_INT32 or TYPE_FP32"},
      {"a batch output has one source", Config(scatter + R"(target_name: "OUTPUT" } ])"),
       "batch_output[0].source_input",
       "batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, got 0"},
      {"a batch output's source is an input",
       Config(scatter + R"(target_name: "OUTPUT" source_input: "UNKNOWN_INPUT" } ])"), "batch_output[0].source_input",
       "unknown source input name 'UNKNOWN_INPUT'"},
      {"a batch output's target is an output",
       Config(scatter + R"(target_name: "UNKNOWN_OUTPUT" source_input: "INPUT" } ])"), "batch_output[0].target_name",
       "unknown target output name 'UNKNOWN_OUTPUT'"},
      {"a batch output names a target once",
       Config(scatter + R"(target_name: [ "OUTPUT", "OUTPUT" ] source_input: "INPUT" } ])"),
       "batch_output[0].target_name", "target output name 'OUTPUT' can only be specified once"},
      {"priority levels need a default level", Config("dynamic_batching { priority_levels: 3 }"),
       "dynamic_batching.default_priority_level", "default priority level must be in range [1, 3] for m"},
      {"the default level is one of the levels",
       Config("dynamic_batching { priority_levels: 3 default_priority_level: 5 }"),
       "dynamic_batching.default_priority_level", "default priority level must be in range [1, 3] for m"},
      {"a priority queue policy is for a level (not 0)",
       Config("dynamic_batching { priority_levels: 3 default_priority_level: 2 priority_queue_policy { key: 0 value: { "
              "} } }"),
       "dynamic_batching.priority_queue_policy",
       "priority queue policy must have priority level in range [1, 3] for m"},
      {"a priority queue policy is for a level (not past the last)",
       Config("dynamic_batching { priority_levels: 3 default_priority_level: 2 priority_queue_policy { key: 4 value: { "
              "} } }"),
       "dynamic_batching.priority_queue_policy",
       "priority queue policy must have priority level in range [1, 3] for m"},
      {"preserve_ordering with one priority level",
       Config("dynamic_batching { preserve_ordering: true priority_levels: 3 default_priority_level: 2 }"),
       "dynamic_batching.preserve_ordering",
       "Only one priority level is allowed when 'preserve_ordering' is true for m"},
      {"preserve_ordering without DELAY (default policy)",
       Config("dynamic_batching { preserve_ordering: true default_queue_policy { timeout_action: DELAY "
              "default_timeout_microseconds: 1000 } }"),
       "dynamic_batching.preserve_ordering",
       "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for m"},
      {"preserve_ordering without DELAY (a level's policy)",
       Config("dynamic_batching { preserve_ordering: true priority_levels: 1 default_priority_level: 1 "
              "priority_queue_policy { key: 1 value: { timeout_action: DELAY default_timeout_microseconds: 9 } } }"),
       "dynamic_batching.preserve_ordering",
       "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for m"},
      {"one tensor per sequence control", Config(R"(sequence_batching { control_input [
           { name: "E1" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] },
           { name: "E2" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] } ] })"),
       "sequence_batching.control_input[1]", "sequence batching specifies multiple CONTROL_SEQUENCE_END tensors for m"},
      {"one control per tensor", Config(R"(sequence_batching { control_input [
           { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
           { name: "START" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] } ] })"),
       "sequence_batching.control_input[1]",
       "sequence batching control tensor 'START' is specified for multiple control kinds for m"},
      {"a boolean control gives its false and true values",
       Config(
           R"(sequence_batching { control_input [ { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY } ] } ] })"),
       "sequence_batching.control_input[0]",
       "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for "
       "CONTROL_SEQUENCE_READY for m"},
      {"ensemble scheduling only on the ensemble platform",
       Config(R"(ensemble_scheduling { step [ { model_name: "a" model_version: -1 } ] })"), "ensemble_scheduling",
       "ensemble scheduling cannot be set for model 'm' whose platform is not ensemble"},
      {"a CPU group names no GPUs", Config("instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]"),
       "instance_group[0].gpus", "instance group m_0 of model m has kind KIND_CPU but specifies one or more GPUs"},
      {"GPU ids are not negative (the group's own name)",
       Config(R"(instance_group [ { kind: KIND_CPU }, { name: "g" kind: KIND_GPU gpus: [ -1 ] } ])"),
       "instance_group[1].gpus[0]", "instance group g of model m specifies invalid or unsupported gpu id -1"},
  };
}

TEST(TritonConfigRules, EachRuleRefusesInTritonsWordsAfterTheField) {
  for (const Rule& r : Rules()) {
    absl::StatusOr<v1::ModelConfig> read = ParseModelConfig(r.config, "m");
    ASSERT_FALSE(read.ok()) << r.rule;
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument) << r.rule;
    const std::string expected = std::string("config.pbtxt: ") + r.field + ": " + r.triton;
    EXPECT_EQ(std::string(read.status().message()).substr(0, expected.size()), expected) << r.rule;
  }
}

TEST(TritonConfigRules, SoundUsesOfTheSameFieldsPassTheRules) {
  const std::vector<std::string> sound = {
      Config("dynamic_batching { priority_levels: 3 default_priority_level: 3 priority_queue_policy { key: 1 value: { "
             "timeout_action: DELAY default_timeout_microseconds: 5 } } }"),
      Config("dynamic_batching { preserve_ordering: true default_queue_policy { timeout_action: DELAY } }"),
      Config(R"(batch_input [ { kind: BATCH_ITEM_SHAPE_FLATTEN target_name: "N" data_type: TYPE_INT32
                                source_input: "INPUT" } ]
                batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "OUTPUT" source_input: "INPUT" } ])"),
      Config(R"(sequence_batching { control_input [
           { name: "S" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },
           { name: "R" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] } ] })"),
      Config(R"(instance_group [ { kind: KIND_GPU gpus: [ 0, 1 ] }, { kind: KIND_CPU count: 2 } ])"),
  };
  for (const std::string& text : sound) {
    absl::StatusOr<nlohmann::json> tree = TextProtoToJson(text);
    ASSERT_TRUE(tree.ok()) << tree.status();
    EXPECT_TRUE(CheckTritonRules(*tree, "m", "config.pbtxt").ok()) << CheckTritonRules(*tree, "m", "config.pbtxt");
  }
}

// A GPU id must be one of the server's CUDA devices: checked once they are
// known, with Triton's words and the ids there are.
TEST(TritonConfigRules, GpuIdsMustBeTheServersDevices) {
  absl::StatusOr<nlohmann::json> tree =
      TextProtoToJson(Config("instance_group [ { kind: KIND_GPU gpus: [ 0 ] }, { kind: KIND_GPU gpus: [ 1, 42 ] } ]"));
  ASSERT_TRUE(tree.ok());
  EXPECT_TRUE(CheckTritonGpuIds(*tree, "m", "config.pbtxt", {0, 1, 42}).ok());
  absl::Status two = CheckTritonGpuIds(*tree, "m", "config.pbtxt", {0, 1});
  EXPECT_EQ(two.message(),
            "config.pbtxt: instance_group[1].gpus[1]: instance group m_1 of model m specifies invalid or unsupported "
            "gpu id 42. GPUs with at least the minimum required CUDA compute compatibility are: 0, 1");
  absl::Status none = CheckTritonGpuIds(*tree, "m", "config.pbtxt", {});
  EXPECT_NE(none.message().find("instance group m_0 of model m specifies invalid or unsupported gpu id 0. "),
            std::string::npos)
      << none;
}

}  // namespace
}  // namespace infergate
