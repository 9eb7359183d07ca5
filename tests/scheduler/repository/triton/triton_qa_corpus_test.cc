// The model configurations Triton's own QA refuses when the platform is
// set and nothing is filled in (its model-configuration suite's 58
// `noautofill_platform` cases), each written here from its description and
// refused for Triton's reason, in Triton's words: its suite starts the server
// on a repository holding the one model and looks for one of the case's
// expected texts in the error. Here each config is read as a repository's
// config.pbtxt is (ParseModelConfig, with the platform set to
// pytorch_libtorch as the suite sets it), and the GPU ids are checked
// against a server with one CUDA device (cuda:0), as on Triton's QA
// machines. The cases keep Triton's names, so a failure names the case.
//
// The configs are made by the builders below from a case's shape (which
// field, which dims), not copied: what is compared is the refusal.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/repository/model_config.h"
#include "scheduler/repository/triton/text_proto_json.h"
#include "scheduler/repository/triton/triton_config_rules.h"

namespace infergate {
namespace {

// One tensor of an input or output list.
std::string QaTensor(const std::string& name, const std::string& dims, const char* reshape = nullptr,
                     const char* type = "TYPE_FP32") {
  std::string t = absl::StrCat("{ name: \"", name, "\"");
  if (type != nullptr) absl::StrAppend(&t, " data_type: ", type);
  absl::StrAppend(&t, " dims: [ ", dims, " ]");
  if (reshape != nullptr) absl::StrAppend(&t, " reshape { shape: [ ", reshape, " ] }");
  return t + " }";
}

// A model config as Triton's harness gives it to the server: the case's
// fields, and the platform (PyTorch here).
std::string QaModel(const std::string& name, int max_batch_size, const std::string& input, const std::string& output,
                    const std::string& more = "") {
  return absl::StrCat("name: \"", name, "\" max_batch_size: ", max_batch_size, " input [ ", input, " ] output [ ",
                      output, " ] ", more, " platform: \"pytorch_libtorch\"");
}

// The INT32 model the batching, sequence and priority cases share.
std::string IntModel(const std::string& name, int max_batch_size, const std::string& more,
                     const std::string& dims = "1") {
  return QaModel(name, max_batch_size, QaTensor("INPUT", dims, nullptr, "TYPE_INT32"),
                 QaTensor("OUTPUT", dims, nullptr, "TYPE_INT32"), more);
}

// The image model the instance-group and batch-size cases share.
std::string ImageModel(const std::string& name, int max_batch_size, const std::string& more) {
  return QaModel(name, max_batch_size,
                 "{ name: \"data\" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 1, 28, 28 ] }",
                 QaTensor("prob", "10, 1, 1"), more);
}

struct Case {
  std::string name;
  std::string config;
  // Triton's texts for it: the refusal must contain one of them.
  std::vector<std::string> expected;
};

// What Triton says when a batch input or output is set on a platform that
// does not take them (its newer refusal of every batch_input case).
const char kBatchIoUnsupported[] =
    "batch inputs and batch outputs are only supported for custom platform and TensorRT platform";

void AddBatchInputCases(std::vector<Case>& cases) {
  const char* kinds[] = {"BATCH_ELEMENT_COUNT", "BATCH_ACCUMULATED_ELEMENT_COUNT",
                         "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE"};
  for (int i = 0; i < 4; ++i) {
    const std::string input = absl::StrCat("kind: ", kinds[i], " target_name: \"B\" data_type: TYPE_FP32");
    cases.push_back(
        {absl::StrCat("batch_input_less_source", i),
         IntModel("m", 0, absl::StrCat("batch_input [ { ", input, " } ]"), "-1"),
         {absl::StrCat("batch input kind '", kinds[i], "' expects 1 source input, got 0"), kBatchIoUnsupported}});
    cases.push_back(
        {absl::StrCat("batch_input_many_source", i),
         IntModel("m", 0, absl::StrCat("batch_input [ { ", input, " source_input: [ \"INPUT\", \"INPUT\" ] } ]"), "-1"),
         {absl::StrCat("batch input kind '", kinds[i], "' expects 1 source input, got 2"), kBatchIoUnsupported}});
  }
  cases.push_back({"batch_input_unknown_source",
                   IntModel("m", 0,
                            "batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: \"B\" data_type: TYPE_FP32 "
                            "source_input: \"UNKNOWN_INPUT\" } ]",
                            "-1"),
                   {"unknown source input name 'UNKNOWN_INPUT'", kBatchIoUnsupported}});
}

void AddBatchOutputCases(std::vector<Case>& cases) {
  auto output = [](const std::string& fields) {
    return IntModel("m", 0, absl::StrCat("batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE ", fields, " } ]"),
                    "-1");
  };
  cases.push_back({"batch_output_duplicated_target",
                   output("target_name: [ \"OUTPUT\", \"OUTPUT\" ] source_input: \"INPUT\""),
                   {"target output name 'OUTPUT' can only be specified once", kBatchIoUnsupported}});
  cases.push_back(
      {"batch_output_less_source",
       output("target_name: \"OUTPUT\""),
       {"batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, got 0", kBatchIoUnsupported}});
  cases.push_back(
      {"batch_output_many_source",
       output("target_name: \"OUTPUT\" source_input: [ \"INPUT\", \"INPUT\" ]"),
       {"batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, got 2", kBatchIoUnsupported}});
  cases.push_back({"batch_output_unknown_source",
                   output("target_name: \"OUTPUT\" source_input: \"UNKNOWN_INPUT\""),
                   {"unknown source input name 'UNKNOWN_INPUT'", kBatchIoUnsupported}});
  cases.push_back({"batch_output_unknown_target",
                   output("target_name: \"UNKNOWN_OUTPUT\" source_input: \"INPUT\""),
                   {"unknown target output name 'UNKNOWN_OUTPUT'", kBatchIoUnsupported}});
}

// One control tensor of a sequence batcher: `values` empty for none.
std::string Control(const std::string& name, const std::string& kind, const std::string& values = "[ 0, 1 ]") {
  std::string control = absl::StrCat("{ name: \"", name, "\" control [ { kind: CONTROL_SEQUENCE_", kind);
  if (!values.empty()) absl::StrAppend(&control, " int32_false_true: ", values);
  return control + " } ] }";
}

void AddSequenceCases(std::vector<Case>& cases) {
  auto sequence = [](const std::string& name, const std::vector<std::string>& controls) {
    return IntModel(name, 8,
                    absl::StrCat("sequence_batching { control_input [ ", absl::StrJoin(controls, ", "), " ] }"));
  };
  cases.push_back(
      {"control_kind_end_multiple",
       sequence("control_kind_end_multiple",
                {Control("START", "START"), Control("READY", "READY"), Control("END0", "END"), Control("END1", "END")}),
       {"sequence batching specifies multiple CONTROL_SEQUENCE_END tensors for control_kind_end_multiple"}});
  cases.push_back(
      {"control_kind_ready_multiple",
       sequence("control_kind_ready_multiple",
                {Control("START", "START"), Control("READY0", "READY"), Control("READY1", "READY")}),
       {"sequence batching specifies multiple CONTROL_SEQUENCE_READY tensors for control_kind_ready_multiple"}});
  cases.push_back(
      {"control_kind_start_multiple",
       sequence("control_kind_start_multiple", {Control("START", "START"), Control("READY", "START")}),
       {"sequence batching specifies multiple CONTROL_SEQUENCE_START tensors for control_kind_start_multiple"}});
  cases.push_back({"control_tensor_multiple",
                   sequence("control_tensor_multiple", {Control("START", "START"), Control("START", "READY")}),
                   {"sequence batching control tensor 'START' is specified for multiple control kinds for "
                    "control_tensor_multiple"}});
  cases.push_back({"control_tensor_no_value",
                   sequence("control_tensor_no_value", {Control("START", "START"), Control("READY", "READY", "")}),
                   {"sequence batching must specify either 'int32_false_true', 'fp32_false_true' or "
                    "'bool_false_true' for CONTROL_SEQUENCE_READY for control_tensor_no_value"}});
}

void AddQueueCases(std::vector<Case>& cases) {
  auto batching = [](const std::string& name, const std::string& fields) {
    return IntModel(name, 8, absl::StrCat("dynamic_batching { ", fields, " }"));
  };
  for (const char* level : {"", " default_priority_level: 5"}) {
    const std::string name = absl::StrCat("default_priority_level", *level ? 1 : 0);
    cases.push_back({name,
                     batching(name, absl::StrCat("priority_levels: 3", level)),
                     {absl::StrCat("default priority level must be in range [1, 3] for ", name)}});
  }
  for (int key : {0, 4}) {
    const std::string name = absl::StrCat("priority_level", key == 0 ? 0 : 1);
    cases.push_back({name,
                     batching(name, absl::StrCat("priority_levels: 3 default_priority_level: 2 priority_queue_policy "
                                                 "{ key: ",
                                                 key, " value: { } }")),
                     {absl::StrCat("priority queue policy must have priority level in range [1, 3] for ", name)}});
  }
  cases.push_back({"preserve_ordering0",
                   batching("preserve_ordering0",
                            "preserve_ordering: true priority_levels: 3 default_priority_level: 2 "
                            "priority_queue_policy { key: 1 value: { } }"),
                   {"Only one priority level is allowed when 'preserve_ordering' is true for preserve_ordering0"}});
  const std::string delay = "{ timeout_action: DELAY default_timeout_microseconds: 1000 }";
  cases.push_back({"preserve_ordering1",
                   batching("preserve_ordering1", "preserve_ordering: true default_queue_policy " + delay),
                   {"Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for "
                    "preserve_ordering1"}});
  cases.push_back({"preserve_ordering2",
                   batching("preserve_ordering2",
                            "preserve_ordering: true priority_levels: 1 default_priority_level: 1 "
                            "priority_queue_policy { key: 1 value: " +
                                delay + " }"),
                   {"Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for "
                    "preserve_ordering2"}});
}

void AddModelCases(std::vector<Case>& cases) {
  cases.push_back({"ensemble_scheduling_set",
                   ImageModel("ensemble_scheduling_set", 8,
                              "ensemble_scheduling { step [ { model_name: \"model_a\" model_version: -1 input_map { "
                              "key: \"model_a_input\" value: \"data\" } output_map { key: \"model_a_output\" value: "
                              "\"prob\" } } ] } instance_group [ { kind: KIND_GPU gpus: [ 42 ] } ]"),
                   {"ensemble scheduling cannot be set for model 'ensemble_scheduling_set' whose platform is not "
                    "ensemble"}});
  cases.push_back({"invalid_cpu",
                   ImageModel("invalid_cpu", 8, "instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]"),
                   {"instance group invalid_cpu_0 of model invalid_cpu has kind KIND_CPU but specifies one or more "
                    "GPU"}});
  cases.push_back({"invalid_gpu",
                   ImageModel("invalid_gpu", 8, "instance_group [ { kind: KIND_GPU gpus: [ 42 ] } ]"),
                   {"instance group invalid_gpu_0 of model invalid_gpu specifies invalid or unsupported gpu id 42. "
                    "GPUs with at least the minimum required CUDA compute compatibility"}});
  cases.push_back(
      {"negative_gpu",
       ImageModel("negative_gpu", 1,
                  "instance_group [ { gpus: [ 0 ] } ] instance_group [ { kind: KIND_GPU gpus: [ -1 ] } ]"),
       {"instance group negative_gpu_1 of model negative_gpu specifies invalid or unsupported gpu id -1. GPUs with at "
        "least the minimum required CUDA compute compatibility"}});
  cases.push_back(
      {"missing_datatype",
       QaModel("missing_datatype", 4, QaTensor("input", "2, -1", nullptr, nullptr), QaTensor("output", "1")),
       {"model input 'input' must specify 'data_type'"}});
  cases.push_back({"negative_max_batch_size",
                   ImageModel("negative_max_batch_size", -2, ""),
                   {"'max_batch_size' must be non-negative value for negative_max_batch_size"}});
}

// A reshape case: the input or the output (the other side is [1]) has
// `dims` and `reshape`.
Case Reshape(const std::string& name, int max_batch_size, bool input, const std::string& dims, const char* reshape,
             const std::string& why) {
  const std::string shaped = QaTensor(input ? "input" : "output", dims, reshape);
  return {name,
          input ? QaModel(name, max_batch_size, shaped, QaTensor("output", "1"))
                : QaModel(name, max_batch_size, QaTensor("input", "1"), shaped),
          {absl::StrCat("model ", input ? "input 'input' " : "output 'output' ", why, " for ", name)}};
}

void AddReshapeCases(std::vector<Case>& cases) {
  const std::string size = "has different size for dims and reshape";
  const std::string variable = "has different number of variable-size dimensions for dims and reshape";
  const std::string zero = "reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension";
  cases.push_back(Reshape("reshape_elementcount0", 4, true, "1, 3, 2", "5", size));
  cases.push_back(Reshape("reshape_elementcount1", 4, true, "15", "2, 1, 5", size));
  cases.push_back(Reshape("reshape_elementcount2", 4, false, "1, 3, 2", "3", size));
  cases.push_back(Reshape("reshape_elementcount3", 4, false, "15", "3, 2, 5", size));
  const std::string scalar = "cannot have empty reshape for non-batching model as scalar tensors are not supported";
  cases.push_back(Reshape("reshape_nobatch_empty0", 0, true, "1", "", scalar));
  cases.push_back(Reshape("reshape_nobatch_empty1", 0, false, "1", "", scalar));
  // The same six variable-size cases, batching and not.
  for (int max_batch_size : {0, 4}) {
    const std::string prefix = max_batch_size == 0 ? "reshape_nobatch_variable" : "reshape_variable";
    cases.push_back(Reshape(prefix + "0", max_batch_size, true, "2, -1", "2, 2", size));
    cases.push_back(Reshape(prefix + "1", max_batch_size, false, "2, -1", "2, 2", size));
    cases.push_back(Reshape(prefix + "2", max_batch_size, true, "2, -1", "2, -1, 2", size));
    cases.push_back(Reshape(prefix + "3", max_batch_size, false, "2, -1", "1, -1, 2", size));
    cases.push_back(Reshape(prefix + "4", max_batch_size, true, "2, -1", "2, -1, -1", variable));
    cases.push_back(Reshape(prefix + "5", max_batch_size, false, "2, -1", "2, -1, -1", variable));
    const std::string zeros = max_batch_size == 0 ? "reshape_nobatch_zerodims" : "reshape_zerodims";
    cases.push_back(Reshape(zeros + "0", max_batch_size, true, "2, 2", "0", zero));
    cases.push_back(Reshape(zeros + "1", max_batch_size, false, "2, 2", "0", zero));
  }
}

void AddZeroDimCases(std::vector<Case>& cases) {
  const std::string why = "dimension must be integer >= 1, or -1 to indicate a variable-size dimension";
  auto zero = [&](const std::string& name, bool input, const std::string& dims) {
    const std::string side = input ? "input" : "output";
    return Case{name,
                input ? QaModel(name, 8, QaTensor("input", dims), QaTensor("output", "1"))
                      : QaModel(name, 8, QaTensor("input", "1"), QaTensor("output", dims)),
                {absl::StrCat("model ", side, " '", side, "' ", why, " for ", name)}};
  };
  cases.push_back(zero("zerodims_input0", true, "1, 0, 28"));
  cases.push_back(zero("zerodims_input1", true, "0"));
  cases.push_back(zero("zerodims_output0", false, "1, 1, 0"));
  cases.push_back(zero("zerodims_output1", false, "0"));
}

std::vector<Case> QaCorpus() {
  std::vector<Case> cases;
  AddBatchInputCases(cases);
  AddBatchOutputCases(cases);
  AddSequenceCases(cases);
  AddQueueCases(cases);
  AddModelCases(cases);
  AddReshapeCases(cases);
  AddZeroDimCases(cases);
  return cases;
}

// How a repository refuses `config`: its reading, then the GPU ids against
// a server with cuda:0. OK when both accept it.
absl::Status Refusal(const Case& c) {
  absl::StatusOr<v1::ModelConfig> read = ParseModelConfig(c.config, c.name);
  if (!read.ok()) return read.status();
  absl::StatusOr<nlohmann::json> tree = TextProtoToJson(c.config);
  if (!tree.ok()) return tree.status();
  return CheckTritonGpuIds(*tree, c.name, "config.pbtxt", {0});
}

TEST(TritonQaCorpus, EveryCaseIsRefusedForTritonsReason) {
  const std::vector<Case> cases = QaCorpus();
  ASSERT_EQ(cases.size(), 58u);  // Triton's noautofill_platform cases, all of them
  int refused_as_triton = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name + ": " + c.config);
    const absl::Status refusal = Refusal(c);
    ASSERT_FALSE(refusal.ok());
    EXPECT_EQ(refusal.code(), absl::StatusCode::kInvalidArgument) << refusal;
    bool found = false;
    for (const std::string& expected : c.expected) {
      found = found || refusal.message().find(expected) != absl::string_view::npos;
    }
    EXPECT_TRUE(found) << "refused with: " << refusal.message() << "\nTriton's: " << absl::StrJoin(c.expected, " | ");
    refused_as_triton += found ? 1 : 0;
  }
  EXPECT_EQ(refused_as_triton, 58);
}

// The names are Triton's cases, each once: a case dropped or written twice
// is caught here, not by a count that still adds up.
TEST(TritonQaCorpus, EachOfTritonsCasesOnce) {
  std::vector<std::string> names;
  for (const Case& c : QaCorpus()) names.push_back(c.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
  EXPECT_EQ(names.front(), "batch_input_less_source0");
  EXPECT_EQ(names.back(), "zerodims_output1");
}

}  // namespace
}  // namespace infergate
