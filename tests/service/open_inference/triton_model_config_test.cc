#include "service/open_inference/triton_model_config.h"

#include <gtest/gtest.h>

#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/common/text_proto.h"

namespace infergate {
namespace {

v1::ModelConfig Text(const std::string& text) { return testing::FromText<v1::ModelConfig>(text); }

// Triton's JSON, field by field, to infergate's config and the fields set.
TEST(TritonModelConfigTest, MapsEachServedField) {
  struct Case {
    const char* json;
    const char* config;  // infergate's text form of what is set
    std::set<std::string> fields;
  };
  // clang-format off: a table, one row a line
  const std::vector<Case> cases = {
      {R"({"max_batch_size": 8})", "max_batch_size: 8", {"max_batch_size"}},
      {R"({"name": "m", "platform": "pytorch_libtorch", "backend": "pytorch"})", "", {}},
      {R"({"input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [3, "224", -1]}]})",
       R"(inputs { name: "INPUT__0" dtype: FLOAT32 dims: [3, 224, -1] })", {"inputs"}},
      {R"({"output": [{"name": "OUTPUT__0", "data_type": "TYPE_INT64", "dims": [10], "label_filename": "l.txt"}]})",
       R"(outputs { name: "OUTPUT__0" dtype: INT64 dims: [10] label_filename: "l.txt" })", {"outputs"}},
      {R"({"dynamic_batching": {"preferred_batch_size": [4, 8], "max_queue_delay_microseconds": 100}})",
       "dynamic_batching { preferred_batch_sizes: [4, 8] max_queue_delay_us: 100 }", {"dynamic_batching"}},
      {R"({"dynamic_batching": {"priority_levels": 3, "default_priority_level": 2}})",
       "priority_levels: 3 default_priority_level: 2",
       {"dynamic_batching", "priority_levels", "default_priority_level"}},
      {R"({"dynamic_batching": {"default_queue_policy": {"timeout_action": "DELAY",
           "default_timeout_microseconds": 5000, "allow_timeout_override": true, "max_queue_size": 16}}})",
       "default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5000 "
       "allow_timeout_override: true max_queue_size: 16 }",
       {"dynamic_batching", "default_queue_policy"}},
      {R"({"instance_group": [{"kind": "KIND_GPU", "gpus": [0, 1]}, {"kind": "KIND_CPU", "count": 1}]})",
       R"(devices: ["cuda:0", "cuda:1", "cpu"])", {"devices", "accelerator_instances"}},
      {R"({"instance_group": [{"kind": "KIND_GPU"}, {"kind": "KIND_AUTO"}]})", "", {"devices", "accelerator_instances"}},
      // A GPU group's count is the model's batches at once on each GPU (the
      // largest group's); a CPU group's count is accepted and not used.
      {R"({"instance_group": [{"kind": "KIND_GPU", "count": 2, "gpus": [0]}, {"kind": "KIND_GPU", "count": 3,
           "gpus": [1]}, {"kind": "KIND_CPU", "count": 4}]})",
       R"(devices: ["cuda:0", "cuda:1", "cpu"] accelerator_instances: 3)", {"devices", "accelerator_instances"}},
      {R"({"instance_group": [{"count": 2}]})", "accelerator_instances: 2", {"devices", "accelerator_instances"}},
      {R"({"version_policy": {"latest": {"num_versions": 2}}})", "version_policy { latest { num_versions: 2 } }",
       {"version_policy"}},
      {R"({"version_policy": {"specific": {"versions": [1, "3"]}}})",
       "version_policy { specific { versions: [1, 3] } }", {"version_policy"}},
      {R"({"version_policy": {"all": {}}})", "version_policy { all {} }", {"version_policy"}},
      {R"({"model_warmup": [{"name": "w", "batch_size": 2, "count": 3, "inputs": {"INPUT__0": {"data_type":
           "TYPE_FP32", "dims": [4], "random_data": true}, "ids": {"data_type": "TYPE_INT64", "dims": [2],
           "input_data_file": "ids.bin"}}}]})",
       R"(warmup: true warmup_samples { name: "w" batch_size: 2 count: 3
            inputs { name: "INPUT__0" dtype: FLOAT32 dims: [4] source: RANDOM_DATA }
            inputs { name: "ids" dtype: INT64 dims: [2] source: DATA_FILE data_file: "ids.bin" } })",
       {"warmup", "warmup_samples"}},
      {R"({"response_cache": {"enable": false}, "model_transaction_policy": {"decoupled": false}})", "", {}},
      {R"({"parameters": {"INFERENCE_MODE": {"string_value": "true"}}, "default_model_filename": "model.pt"})", "",
       {"torchscript_optimization"}},
      {R"({"parameters": [{"key": "DISABLE_OPTIMIZED_EXECUTION", "value": {"string_value": "true"}}]})",
       "torchscript_optimization: TORCHSCRIPT_OPTIMIZE_OFF", {"torchscript_optimization"}},
  };
  // clang-format on
  for (const Case& c : cases) {
    absl::StatusOr<ConfigOverride> got = ConfigOverrideFromTritonJson(c.json, "m");
    ASSERT_TRUE(got.ok()) << c.json << ": " << got.status();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got->values, Text(c.config)))
        << c.json << " gave " << got->values.ShortDebugString();
    EXPECT_EQ(got->fields, c.fields) << c.json;
  }
}

TEST(TritonModelConfigTest, RefusesWhatItDoesNotServeNamingTheField) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"{not json", "parameters.config"},
      {"[1]", "parameters.config: expected a JSON object"},
      {R"({"name": "other"})", "parameters.config.name"},
      {R"({"platform": "onnxruntime_onnx"})", "platform"},
      {R"({"sequence_batching": {}})", "parameters.config.sequence_batching"},
      {R"({"model_warmup": [{"name": "w"}]})", "parameters.config.model_warmup[0].batch_size: must be at least 1"},
      {R"({"model_warmup": [{"batch_size": 1, "inputs": {"x": {"data_type": "TYPE_FP32", "dims": [1],
           "zero_data": true, "random_data": true}}}]})",
       "model_warmup[0].inputs[\"x\"]: expected one of zero_data, random_data or input_data_file"},
      {R"({"model_warmup": [{"batch_size": 1, "inputs": {"x": {"data_type": "TYPE_FP32", "dims": [1],
           "input_data_file": "../../etc/passwd"}}}]})",
       "model_warmup[0].inputs[\"x\"].input_data_file: expected a file name in the model folder's warmup/ folder"},
      {R"({"ensemble_scheduling": {"step": [{"model_name": "a"}]}})", "ensemble_scheduling"},
      {R"({"model_transaction_policy": {"decoupled": true}})", "model_transaction_policy"},
      {R"({"parameters": {"ENABLE_NVFUSER": {"string_value": "true"}}})",
       "parameters.config.parameters.ENABLE_NVFUSER"},
      {R"({"default_model_filename": "model.onnx"})", "default_model_filename"},
      {R"({"input": [{"name": "x", "data_type": "TYPE_UINT16", "dims": [1]}]})", "input[0].data_type"},
      {R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [1], "reshape": {"order": [1]}}]})",
       "input[0].reshape.order"},
      {R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [-2]}]})", "input[0].dims[0]"},
      {R"({"output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [1], "optional": true}]})", "output[0].optional"},
      {R"({"dynamic_batching": {"default_queue_policy": {"timeout_action": "DROP"}}})",
       "dynamic_batching.default_queue_policy.timeout_action"},
      {R"({"dynamic_batching": {"default_queue_policy": {"allow_timeout_override": 1}}})",
       "dynamic_batching.default_queue_policy.allow_timeout_override"},
      {R"({"dynamic_batching": {"priority_queue_policy": {"1": {"max_queue_size": 4}}}})",
       "dynamic_batching.priority_queue_policy"},
      {R"({"instance_group": [{"kind": "KIND_GPU", "count": 65}]})", "instance_group[0].count"},
      {R"({"instance_group": [{"kind": "KIND_GPU", "count": -1}]})", "instance_group[0].count"},
      {R"({"instance_group": [{"kind": "KIND_MODEL"}]})", "instance_group[0].kind"},
      {R"({"version_policy": {"newest": {}}})", "version_policy"},
      {R"({"max_batch_size": -1})", "max_batch_size"},
  };
  for (const auto& [json, needle] : cases) {
    absl::StatusOr<ConfigOverride> got = ConfigOverrideFromTritonJson(json, "m");
    ASSERT_FALSE(got.ok()) << json;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_NE(got.status().message().find(needle), absl::string_view::npos) << json << ": " << got.status();
  }
}

}  // namespace
}  // namespace infergate
