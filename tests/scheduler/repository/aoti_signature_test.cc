#include "scheduler/repository/aoti_signature.h"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "scheduler/repository/aoti_package.h"
#include "scheduler/repository/model_repository.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/text_proto.h"
#include "tests/common/zip_writer.h"

namespace infergate {
namespace {

v1::ModelConfig SignatureConfig(const std::string& text) { return testing::FromText<v1::ModelConfig>(text); }

constexpr char kExported[] = R"(max_batch_size: 64
inputs { name: "x" dtype: FLOAT32 dims: [16] }
inputs { name: "mask" dtype: BOOL dims: [-1] }
outputs { name: "y" dtype: FLOAT32 dims: [4] })";

// The agreement rule, as a table: (config.pbtxt, the package's signature)
// -> "" when they agree, else a piece of the message (the field at fault).
TEST(AotiSignatureTest, TheConfigMustAgreeWithWhatThePackageWasExportedWith) {
  const std::string x = R"(inputs { name: "x" dtype: FLOAT32 dims: [16] })";
  const std::string mask = R"(inputs { name: "mask" dtype: BOOL dims: [-1] })";
  const std::string y = R"(outputs { name: "y" dtype: FLOAT32 dims: [4] })";
  struct Case {
    std::string config;
    const char* problem;
  } cases[] = {
      {"max_batch_size: 64 " + x + mask + y, ""},
      {"max_batch_size: 8 " + x + mask + y, ""},  // below the exported maximum
      {"max_batch_size: 64 " + x + mask, ""},     // outputs left out
      {"max_batch_size: 64 " + x + R"(inputs { name: "mask" dtype: BOOL dims: [7] })" + y, ""},  // a free dim fixed
      {"max_batch_size: 128 " + x + mask + y, "max_batch_size is 128, above the batch maximum"},
      {"max_batch_size: 0 " + x + mask + y, "max_batch_size is 0 but the package was exported with a batch"},
      {"max_batch_size: 64 " + x, "config.pbtxt inputs is 1 tensor(s)"},
      {"max_batch_size: 64 " + mask + x + y, "inputs[0].name is 'mask'"},
      {"max_batch_size: 64 " + std::string(R"(inputs { name: "x" dtype: FLOAT16 dims: [16] })") + mask,
       "inputs[0].dtype is FLOAT16 but the package was exported with FLOAT32"},
      {"max_batch_size: 64 " + std::string(R"(inputs { name: "x" dtype: FLOAT32 dims: [8] })") + mask,
       "inputs[0].dims is [8] but the package was exported with [16]"},
      {"max_batch_size: 64 " + std::string(R"(inputs { name: "x" dtype: FLOAT32 dims: [-1] })") + mask,
       "inputs[0].dims is [-1]"},  // the package's fixed dim cannot be loosened
      {"max_batch_size: 64 " + x + mask + R"(outputs { name: "z" dtype: FLOAT32 dims: [4] })",
       "outputs[0].name is 'z'"},
  };
  const v1::ModelConfig exported = SignatureConfig(kExported);
  for (const Case& c : cases) {
    absl::Status s = CheckConfigAgainstPackage(SignatureConfig(c.config), exported);
    if (std::string(c.problem).empty()) {
      EXPECT_TRUE(s.ok()) << c.config << ": " << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << c.config;
      EXPECT_NE(s.message().find(c.problem), std::string::npos) << c.config << ": " << s;
    }
  }
  // A package exported without a batch dimension wants max_batch_size 0.
  v1::ModelConfig unbatched = exported;
  unbatched.set_max_batch_size(0);
  EXPECT_TRUE(CheckConfigAgainstPackage(unbatched, unbatched).ok());
  EXPECT_NE(CheckConfigAgainstPackage(exported, unbatched).message().find("without a batch dimension"),
            std::string::npos);
}

TEST(AotiSignatureTest, AConfigTakesWhatItLeavesOutFromThePackage) {
  const v1::ModelConfig exported = SignatureConfig(kExported);
  // Nothing declared: inputs, outputs and max_batch_size all come from the package.
  v1::ModelConfig done = CompleteConfigFromPackage(SignatureConfig(R"(name: "m" warmup: true)"), exported);
  EXPECT_EQ(done.max_batch_size(), 64u);
  EXPECT_EQ(done.inputs_size(), 2);
  EXPECT_EQ(done.outputs_size(), 1);
  EXPECT_TRUE(done.warmup());
  EXPECT_EQ(done.name(), "m");
  EXPECT_TRUE(CheckConfigAgainstPackage(done, exported).ok());
  // Inputs declared: the config's own batch size and inputs stand; the outputs are filled in.
  done = CompleteConfigFromPackage(
      SignatureConfig(R"(max_batch_size: 8 inputs { name: "x" dtype: FLOAT32 dims: [16] })"), exported);
  EXPECT_EQ(done.max_batch_size(), 8u);
  EXPECT_EQ(done.inputs_size(), 1);
  EXPECT_EQ(done.outputs(0).name(), "y");
  // Outputs declared (say, for a label file) are kept.
  done = CompleteConfigFromPackage(
      SignatureConfig(R"(outputs { name: "y" dtype: FLOAT32 dims: [4] label_filename: "l.txt" })"), exported);
  EXPECT_EQ(done.outputs(0).label_filename(), "l.txt");
  EXPECT_EQ(done.inputs_size(), 2);
}

// The metadata text is read as config.pbtxt (infergate's or Triton's
// schema), holds only the three fields, and the variants agree on it.
TEST(AotiSignatureTest, ThePackageSignatureIsCheckedConfigText) {
  auto variants = [](std::vector<std::string> texts) {
    std::vector<AotiVariant> out;
    for (size_t i = 0; i < texts.size(); ++i) {
      AotiVariant v;
      v.name = "v" + std::to_string(i);
      v.device = "cpu";
      v.library_bytes = 1;
      v.signature = texts[i];
      out.push_back(v);
    }
    return out;
  };
  absl::StatusOr<std::optional<v1::ModelConfig>> none = PackageSignature(variants({"", ""}), "m");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  absl::StatusOr<std::optional<v1::ModelConfig>> one = PackageSignature(variants({kExported, ""}), "m");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(one->has_value());
  EXPECT_EQ((*one)->max_batch_size(), 64u);
  EXPECT_EQ((*one)->inputs(1).name(), "mask");

  absl::StatusOr<std::optional<v1::ModelConfig>> triton =
      PackageSignature(variants({R"(max_batch_size: 4 input [{ name: "x", data_type: TYPE_FP32, dims: [3] }])"}), "m");
  ASSERT_TRUE(triton.ok()) << triton.status();
  EXPECT_EQ((*triton)->inputs(0).dims(0), 3);

  struct Bad {
    std::vector<std::string> texts;
    const char* problem;
  } bad[] = {
      {{kExported, "max_batch_size: 8 inputs { name: \"x\" dtype: FLOAT32 dims: [16] }"},
       "variants 'v0' and 'v1' declare different infergate.config"},
      {{"inputs { name: \"x\" dtype: FLOAT32 dims: [16] } warmup: true"}, "may only hold max_batch_size"},
      {{"max_batch_size: 4"}, "declares no inputs"},
      {{"inputs { name: \"x\" dims: [16] }"}, "infergate.config metadata (variant 'v0'): inputs[0]"},
      {{"not config text {"}, "infergate.config metadata (variant 'v0')"},
  };
  for (const Bad& b : bad) {
    absl::StatusOr<std::optional<v1::ModelConfig>> got = PackageSignature(variants(b.texts), "m");
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << b.problem;
    EXPECT_NE(got.status().message().find(b.problem), std::string::npos) << got.status();
  }
}

// What a compiled package can serve, checked before anything is unpacked:
// (config.pbtxt, the variant's signature, where its weights are) -> "" when
// it can be served, else a piece of the message (the field at fault).
TEST(AotiSignatureTest, WhatACompiledPackageCanServeAsATable) {
  const std::string x = R"(inputs { name: "x" dtype: FLOAT32 dims: [16] })";
  const std::string y = R"(outputs { name: "y" dtype: FLOAT32 dims: [4] })";
  struct Case {
    std::string config;
    std::string signature;        // the variant's infergate.config metadata
    std::string weights_outside;  // where its weights are kept, "" in the library
    const char* problem;
  } cases[] = {
      {"max_batch_size: 8 " + x + y, "", "", ""},  // declared by the config alone
      {"max_batch_size: 64 " + x + R"(inputs { name: "mask" dtype: BOOL dims: [3] })" + y, kExported, "", ""},
      {"max_batch_size: 8 " + x + y, "", "model.wrapper.blob",
       "variant 'v' keeps its weights outside its compiled library (model.wrapper.blob)"},
      {"max_batch_size: 8 " + x + y, "not config text {", "", "infergate.config metadata (variant 'v')"},
      {"max_batch_size: 64 " + x + y, kExported, "", "config.pbtxt inputs is 1 tensor(s)"},
      {"max_batch_size: 8 " + y, "", "", "config.pbtxt must declare the inputs of a compiled package"},
      {R"(inputs { name: "x" dims: [16] })", "", "", "inputs[0]: a compiled package needs dtype and dims"},
      {R"(inputs { name: "s" dtype: BYTES dims: [1] })", "", "", "inputs[0]: a compiled package takes tensors only"},
      {x + R"(inputs { name: "z" dtype: FLOAT32 dims: [2, -1] })", "", "",
       "inputs[1].dims[1]: must be fixed for a compiled package"},
      {x + y + R"(outputs { name: "label" dtype: BYTES dims: [1] })", "", "",
       "outputs[1]: a compiled package returns tensors only"},
  };
  for (const Case& c : cases) {
    AotiVariant variant;
    variant.name = "v";
    variant.device = "cpu";
    variant.library_bytes = 1;
    variant.signature = c.signature;
    variant.weights_outside = c.weights_outside;
    v1::ModelConfig config = SignatureConfig(c.config);
    config.set_name("m");
    absl::StatusOr<InputSignature> got = CheckConfigForCompiledPackage(config, {variant}, variant);
    if (std::string(c.problem).empty()) {
      ASSERT_TRUE(got.ok()) << c.config << ": " << got.status();
      EXPECT_EQ(got->inputs.size(), static_cast<size_t>(config.inputs_size())) << c.config;
      EXPECT_EQ(got->max_batch_size, config.max_batch_size()) << c.config;
    } else {
      EXPECT_FALSE(got.ok()) << c.config;
      EXPECT_NE(got.status().message().find(c.problem), std::string::npos) << c.config << ": " << got.status();
    }
  }
}

// ReadModelConfig completes a model folder's config from its newest
// version's package: a folder with no config.pbtxt at all is served.
TEST(AotiSignatureTest, AModelFolderWithoutConfigTakesTheNewestPackagesSignature) {
  testing::ScratchDir dir("aoti_sig_");
  ASSERT_FALSE(dir.path().empty());
  auto package = [](const std::string& signature) {
    std::string metadata = R"({"AOTI_DEVICE_KEY": "cpu", "infergate.config": ")";
    for (char c : signature)
      metadata += c == '"' ? std::string("\\\"") : c == '\n' ? std::string("\\n") : std::string(1, c);
    metadata += "\"}";
    return testing::StoredZip({{"version", "1"},
                               {"data/aotinductor/model/abc_metadata.json", metadata},
                               {"data/aotinductor/model/abc.so", "not really a library"}});
  };
  auto write = [&](const std::string& rel, const std::string& bytes) {
    std::filesystem::create_directories(std::filesystem::path(dir.path() + "/" + rel).parent_path());
    std::ofstream(dir.path() + "/" + rel, std::ios::binary) << bytes;
  };
  write("m/1/model.pt2", package(kExported));
  write("m/2/model.pt2", package("max_batch_size: 2 inputs { name: \"z\" dtype: INT64 dims: [3] }"));
  write("m/3/model.pt", "TorchScript, newer but not a package");
  absl::StatusOr<v1::ModelConfig> config = ReadModelConfig(dir.path() + "/m", "m");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_batch_size(), 2u);  // version 2's, the newest package
  ASSERT_EQ(config->inputs_size(), 1);
  EXPECT_EQ(config->inputs(0).name(), "z");
  EXPECT_EQ(config->outputs_size(), 0);

  write("m/config.pbtxt", "max_batch_size: 1\ninputs { name: \"z\" dtype: INT64 dims: [3] }\nwarmup: true\n");
  config = ReadModelConfig(dir.path() + "/m", "m");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_batch_size(), 1u);  // the config's own
  EXPECT_TRUE(config->warmup());

  write("m/2/model.pt2", "damaged");  // refused when version 2 loads; the config stands as written
  config = ReadModelConfig(dir.path() + "/m", "m");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->inputs(0).name(), "z");
}

}  // namespace
}  // namespace infergate
