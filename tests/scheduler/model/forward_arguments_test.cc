#include "scheduler/model/forward_arguments.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

ForwardArgument ArgumentTensor(const std::string& name) { return {name, "Tensor", true, false, false}; }
ForwardArgument OptionalTensor(const std::string& name, bool has_default = true) {
  return {name, "Optional[Tensor]", false, true, has_default};
}
ForwardArgument Other(const std::string& name, const std::string& type, bool has_default) {
  return {name, type, false, false, has_default};
}

InputSignature Declared(std::vector<std::string> names) {
  InputSignature s;
  for (auto& n : names) s.inputs.push_back(InputSpec{n, DType::kFloat32, std::vector<int64_t>{4}});
  return s;
}

std::vector<std::string> Names(const ForwardInputs& f) {
  std::vector<std::string> out;
  for (const InputSpec& s : f.signature.inputs) out.push_back(s.name);
  return out;
}

// nn.TransformerEncoder.forward(src, mask=None, src_key_padding_mask=None, is_causal=None) as scripted.
const std::vector<ForwardArgument> kEncoder = {ArgumentTensor("src"), OptionalTensor("mask"),
                                               OptionalTensor("src_key_padding_mask"),
                                               Other("is_causal", "Optional[bool]", true)};

struct ArgumentsCase {
  const char* what;
  std::vector<ForwardArgument> arguments;
  std::optional<std::vector<std::string>> declared;
  std::vector<std::string> inputs;  // empty with `error` set
  bool by_keyword;
  std::vector<std::string> pass_none;
  const char* error;  // a phrase the FAILED_PRECONDITION names, or nullptr
};

// clang-format off: a table, one row a line
const ArgumentsCase kCases[] = {
    {"plain tensors, no config", {ArgumentTensor("a"), ArgumentTensor("b")}, std::nullopt, {"a", "b"}, false, {}, nullptr},
    {"encoder, only src declared", kEncoder, std::vector<std::string>{"src"}, {"src"}, false, {}, nullptr},
    {"encoder, no config: defaults left alone", kEncoder, std::nullopt, {"src"}, false, {}, nullptr},
    {"encoder with its padding mask: keyword call past the skipped mask", kEncoder,
     std::vector<std::string>{"src", "src_key_padding_mask"}, {"src", "src_key_padding_mask"}, true, {}, nullptr},
    {"encoder with mask: positional", kEncoder, std::vector<std::string>{"src", "mask"}, {"src", "mask"}, false, {},
     nullptr},
    {"Optional[Tensor] without default passes None", {ArgumentTensor("x"), OptionalTensor("mask", false)}, std::nullopt,
     {"x"}, true, {"mask"}, nullptr},
    {"required tensor missing from the config", {ArgumentTensor("a"), ArgumentTensor("b")}, std::vector<std::string>{"a"}, {},
     false, {}, "'b' is not declared"},
    {"config names an argument forward() lacks", {ArgumentTensor("a")}, std::vector<std::string>{"a", "z"}, {}, false, {},
     "declares input 'z'"},
    {"config names a non-tensor argument", {ArgumentTensor("a"), Other("k", "int", true)},
     std::vector<std::string>{"a", "k"}, {}, false, {}, "type int"},
    {"non-tensor argument without default", {ArgumentTensor("a"), Other("k", "int", false)}, std::nullopt, {}, false, {},
     "'k' is int without a default"},
    {"Triton's positional names", {ArgumentTensor("x"), ArgumentTensor("y")}, std::vector<std::string>{"INPUT__0", "INPUT__1"},
     {"INPUT__0", "INPUT__1"}, false, {}, nullptr},
    {"positional names in another order fill their arguments", {ArgumentTensor("x"), ArgumentTensor("y")},
     std::vector<std::string>{"b__1", "a__0"}, {"a__0", "b__1"}, false, {}, nullptr},
    {"a positional name past the arguments", {ArgumentTensor("x")}, std::vector<std::string>{"INPUT__1"}, {}, false, {},
     "Triton's '<name>__<N>'"},
    {"a name and a position for one argument", {ArgumentTensor("x"), ArgumentTensor("y")},
     std::vector<std::string>{"x", "INPUT__0", "y"}, {}, false, {}, "both name forward() argument 'x'"},
    {"a positional mask past a skipped one calls by keyword", kEncoder,
     std::vector<std::string>{"INPUT__0", "INPUT__2"}, {"INPUT__0", "INPUT__2"}, true, {}, nullptr},
};
// clang-format on

TEST(ForwardArguments, EachSchemaAndConfig) {
  for (const ArgumentsCase& c : kCases) {
    std::optional<InputSignature> declared;
    if (c.declared) declared = Declared(*c.declared);
    absl::StatusOr<ForwardInputs> got = MatchForwardArguments("m", c.arguments, declared ? &*declared : nullptr, 8);
    if (c.error) {
      ASSERT_FALSE(got.ok()) << c.what;
      EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << c.what;
      EXPECT_NE(got.status().message().find(c.error), absl::string_view::npos) << c.what << ": " << got.status();
      continue;
    }
    ASSERT_TRUE(got.ok()) << c.what << ": " << got.status();
    EXPECT_EQ(Names(*got), c.inputs) << c.what;
    EXPECT_EQ(got->by_keyword, c.by_keyword) << c.what;
    EXPECT_EQ(got->pass_none, c.pass_none) << c.what;
    EXPECT_EQ(got->signature.max_batch_size, 8u) << c.what;
    ASSERT_EQ(got->argument_names.size(), got->signature.inputs.size()) << c.what;
    if (c.declared) {
      for (const InputSpec& s : got->signature.inputs) EXPECT_EQ(s.dtype, DType::kFloat32) << c.what;
    }
  }
}

}  // namespace
}  // namespace infergate
