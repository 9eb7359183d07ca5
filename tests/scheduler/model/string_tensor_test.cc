#include "scheduler/model/string_tensor.h"

#include <ATen/ops/cat.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <filesystem>

#include "scheduler/execution/batch_tensors.h"
#include "scheduler/loaders/torchscript/torchscript_model.h"
#include "scheduler/model/declared_outputs.h"
#include "tests/common/scratch_dir.h"

namespace infergate {
namespace {

std::vector<std::string> Strings(const at::Tensor& t) {
  std::vector<std::string> out;
  for (absl::string_view s : StringElements(t)) out.emplace_back(s);
  return out;
}

TEST(StringTensor, KeepsItsShapeAndStringsThroughViews) {
  at::Tensor t = MakeStringTensor({"a", "", "ccc", std::string(100, 'd'), "é", "f"}, {2, 3});
  ASSERT_TRUE(IsStringTensor(t));
  EXPECT_EQ(TensorDType(t), DType::kBytes);
  EXPECT_EQ(t.sizes().vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Strings(t), (std::vector<std::string>{"a", "", "ccc", std::string(100, 'd'), "é", "f"}));
  // Views (a batch's rows, a reshape, one row) are string tensors too.
  at::Tensor row = t.narrow(0, 1, 1);
  EXPECT_TRUE(IsStringTensor(row));
  EXPECT_EQ(Strings(row), (std::vector<std::string>{std::string(100, 'd'), "é", "f"}));
  EXPECT_EQ(Strings(t.reshape({3, 2})[2]), (std::vector<std::string>{"é", "f"}));
  // A copy LibTorch makes is not: it holds no strings.
  EXPECT_FALSE(IsStringTensor(at::cat({t, t}, 0)));
  EXPECT_EQ(TensorDType(at::cat({t, t}, 0)), DType::kInt64);
}

TEST(StringTensor, AViewKeepsTheStringsAliveAfterTheTensorGoes) {
  at::Tensor row;
  {
    at::Tensor t = MakeStringTensor({"first", "second"}, {2, 1});
    row = t.narrow(0, 1, 1);
  }
  EXPECT_EQ(Strings(row), std::vector<std::string>{"second"});
}

TEST(StringTensor, JoinedBatchesKeepTheirPartsAlive) {
  at::Tensor joined;
  {
    std::vector<std::vector<at::Tensor>> parts = {
        {MakeStringTensor({"a0", "a1"}, {1, 2})},
        {MakeStringTensor({"b0", "b1", "b2", "b3"}, {2, 2})},
    };
    joined = ConcatBatch(parts)[0];
  }
  ASSERT_TRUE(IsStringTensor(joined));
  EXPECT_EQ(joined.sizes().vec(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Strings(joined), (std::vector<std::string>{"a0", "a1", "b0", "b1", "b2", "b3"}));
  // And each request gets its own rows back.
  absl::StatusOr<std::vector<std::vector<NamedTensor>>> split = SplitBatch({{"out", joined}}, {1, 2});
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(Strings((*split)[0][0].tensor), (std::vector<std::string>{"a0", "a1"}));
  EXPECT_EQ(Strings((*split)[1][0].tensor), (std::vector<std::string>{"b0", "b1", "b2", "b3"}));
}

TEST(StringTensor, OverBorrowedBytesAndAsAList) {
  const std::string message = "helloworld";
  at::Tensor t = StringTensorOver({absl::string_view(message).substr(0, 5), absl::string_view(message).substr(5)}, {2});
  c10::List<std::string> list = ToStringList(t);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list.get(0), "hello");
  EXPECT_EQ(list.get(1), "world");
  at::Tensor back = FromStringList(list);
  EXPECT_EQ(Strings(back), (std::vector<std::string>{"hello", "world"}));
}

TEST(StringTensor, TextCheckNamesTheInputElementAndByte) {
  std::vector<NamedTensor> inputs = {{"numbers", at::zeros({2})},
                                     {"text", MakeStringTensor({"fine", "ok", std::string("ab\xff", 3)}, {3})}};
  absl::Status s = CheckStringsAreText(inputs, "m");
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("inputs[1] 'text': BYTES element 2 is not valid UTF-8 (byte 2)"), std::string::npos) << s;
  inputs[1].tensor = MakeStringTensor({"", "日本", "\xf0\x9f\x98\x80"}, {3});
  EXPECT_TRUE(CheckStringsAreText(inputs, "m").ok());
}

TEST(StringTensor, HeldBytesCountEveryElementAndItsCharacters) {
  std::vector<NamedTensor> inputs = {{"x", at::zeros({1000})},
                                     {"s", MakeStringTensor(std::vector<std::string>(1000, "abcd"), {1000})}};
  // Exactly what string_tensor.h charges: 128 bytes an element (its
  // reference and view, a joined batch's reference, the model's List[str]
  // entry and string object, as measured) plus its characters. The old
  // undercharge of 80 an element fails here.
  EXPECT_EQ(StringInputHeldBytes(inputs), 1000u * (128 + 4));
  EXPECT_EQ(StringInputHeldBytes({{"x", at::zeros({1000})}}), 0u);
}

TEST(DeclaredOutputs, StringResultsTakeTheDeclaredShape) {
  v1::ModelConfig config;
  config.set_max_batch_size(8);
  v1::TensorSpec* out = config.add_outputs();
  out->set_name("OUTPUT0");
  out->set_dtype(v1::BYTES);
  out->add_dims(-1);
  out->add_dims(2);
  DeclaredOutputs outputs(config);
  absl::StatusOr<std::vector<NamedTensor>> got =
      outputs.ToAnswer("m", {{"", MakeStringTensor(std::vector<std::string>(12, "s"), {12})}}, /*batch_rows=*/2);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].tensor.sizes().vec(), (std::vector<int64_t>{2, 3, 2}));
  // 13 strings cannot fill [2, -1, 2]; a tensor where strings are declared is the model's fault.
  EXPECT_EQ(outputs.ToAnswer("m", {{"", MakeStringTensor(std::vector<std::string>(13, "s"), {13})}}, 2).status().code(),
            absl::StatusCode::kInternal);
  absl::Status tensor = outputs.ToAnswer("m", {{"", at::zeros({2, 3, 2})}}, 2).status();
  EXPECT_NE(tensor.message().find("declares TYPE_STRING"), std::string::npos) << tensor;
}

// A TorchScript model taking and giving List[str], run in a batch.
TEST(StringTensor, ATorchScriptModelTakesAndGivesListsOfStrings) {
  testing::ScratchDir dir("ig_strings_");
  const std::string path = (std::filesystem::path(dir.path()) / "model.pt").string();
  torch::jit::Module m("Upper");
  m.define(R"(
def forward(self, text: List[str], scale: Tensor) -> Tuple[List[str], Tensor]:
    out: List[str] = []
    for s in text:
        out.append(s.upper() + "!")
    return out, scale * 2
)");
  m.save(path);
  v1::ModelConfig config;
  config.set_name("upper");
  config.set_max_batch_size(4);
  v1::TensorSpec* text = config.add_inputs();
  text->set_name("text");
  text->set_dtype(v1::BYTES);
  text->add_dims(-1);
  v1::TensorSpec* scale = config.add_inputs();
  scale->set_name("scale");
  scale->set_dtype(v1::FLOAT32);
  scale->add_dims(1);
  v1::TensorSpec* shout = config.add_outputs();
  shout->set_name("shout");
  shout->set_dtype(v1::BYTES);
  shout->add_dims(-1);
  v1::TensorSpec* doubled = config.add_outputs();
  doubled->set_name("doubled");
  doubled->set_dtype(v1::FLOAT32);
  doubled->add_dims(1);
  absl::StatusOr<std::shared_ptr<TorchScriptModel>> model =
      TorchScriptModel::Load(path, config, DeviceInfo{}, DType::kFloat32, nullptr);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->signature().inputs[0].dtype, DType::kBytes);
  std::vector<std::vector<at::Tensor>> parts = {
      {MakeStringTensor({"ab", "c"}, {1, 2}), at::ones({1, 1})},
      {MakeStringTensor({"dé", "", "x", "yz"}, {2, 2}), at::ones({2, 1})},
  };
  absl::StatusOr<std::vector<NamedTensor>> out = (*model)->Run(ConcatBatch(parts));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].name, "shout");
  EXPECT_EQ((*out)[0].tensor.sizes().vec(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Strings((*out)[0].tensor), (std::vector<std::string>{"AB!", "C!", "Dé!", "!", "X!", "YZ!"}));
  absl::StatusOr<std::vector<std::vector<NamedTensor>>> split = SplitBatch(*out, {1, 2});
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(Strings((*split)[1][0].tensor), (std::vector<std::string>{"Dé!", "!", "X!", "YZ!"}));

  // A config calling a string argument anything but TYPE_STRING is refused at load.
  text->set_dtype(v1::FLOAT32);
  absl::Status refused = TorchScriptModel::Load(path, config, DeviceInfo{}, DType::kFloat32, nullptr).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("a List[str] argument takes TYPE_STRING"), std::string::npos) << refused;
}

}  // namespace
}  // namespace infergate
