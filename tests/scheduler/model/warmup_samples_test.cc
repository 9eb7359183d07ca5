// Triton's model_warmup samples as MakeWarmupTensors makes them: each
// source's values, a row repeated to the batch size, and strings, for which
// random data falls back to zero data (empty strings), as in Triton.

#include "scheduler/model/warmup_samples.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "scheduler/model/string_tensor.h"

namespace infergate {
namespace {

InputSignature Batching(DType dtype, std::vector<int64_t> dims) {
  InputSignature signature;
  signature.max_batch_size = 8;
  signature.inputs.push_back({"x", dtype, dims});
  return signature;
}

v1::WarmupSample Sample(v1::DataType dtype, v1::WarmupInput::Source source, uint32_t batch_size) {
  v1::WarmupSample sample;
  sample.set_name("s");
  sample.set_batch_size(batch_size);
  v1::WarmupInput* input = sample.add_inputs();
  input->set_name("x");
  input->set_dtype(dtype);
  input->add_dims(3);
  input->set_source(source);
  return sample;
}

TEST(WarmupSamples, RandomStringsFallBackToEmptyStringsAsZeroDataDoes) {
  for (v1::WarmupInput::Source source : {v1::WarmupInput::RANDOM_DATA, v1::WarmupInput::ZERO_DATA}) {
    absl::StatusOr<WarmupTensors> made =
        MakeWarmupTensors(Batching(DType::kBytes, {3}), Sample(v1::DataType::BYTES, source, 2), 0, "/nonexistent");
    ASSERT_TRUE(made.ok()) << made.status();
    ASSERT_EQ(made->tensors.size(), 1u);
    ASSERT_TRUE(IsStringTensor(made->tensors[0]));
    EXPECT_EQ(made->tensors[0].sizes().vec(), (std::vector<int64_t>{2, 3}));
    for (absl::string_view s : StringElements(made->tensors[0])) EXPECT_TRUE(s.empty()) << source;
  }
}

TEST(WarmupSamples, NumbersAreZerosOrFixedSeedValuesInTheirRange) {
  absl::StatusOr<WarmupTensors> zeros = MakeWarmupTensors(
      Batching(DType::kFloat32, {3}), Sample(v1::DataType::FLOAT32, v1::WarmupInput::ZERO_DATA, 4), 0, "/nonexistent");
  ASSERT_TRUE(zeros.ok()) << zeros.status();
  EXPECT_TRUE(zeros->tensors[0].equal(at::zeros({4, 3})));
  auto random = [] {
    return MakeWarmupTensors(Batching(DType::kFloat32, {3}),
                             Sample(v1::DataType::FLOAT32, v1::WarmupInput::RANDOM_DATA, 4), 0, "/nonexistent");
  };
  absl::StatusOr<WarmupTensors> first = random();
  absl::StatusOr<WarmupTensors> second = random();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->tensors[0].sizes().vec(), (std::vector<int64_t>{4, 3}));
  EXPECT_TRUE(first->tensors[0].equal(second->tensors[0])) << "the seed is fixed";
  EXPECT_FALSE(first->tensors[0].equal(at::zeros({4, 3})));
  EXPECT_GE(first->tensors[0].min().item<float>(), -1.0f);
  EXPECT_LT(first->tensors[0].max().item<float>(), 1.0f);
  absl::StatusOr<WarmupTensors> ints = MakeWarmupTensors(
      Batching(DType::kInt64, {3}), Sample(v1::DataType::INT64, v1::WarmupInput::RANDOM_DATA, 2), 0, "/nonexistent");
  ASSERT_TRUE(ints.ok()) << ints.status();
  EXPECT_GE(ints->tensors[0].min().item<int64_t>(), 0);
  EXPECT_LE(ints->tensors[0].max().item<int64_t>(), 9);
}

TEST(WarmupSamples, ASampleThatDoesNotFitTheInputIsRefusedNamingIt) {
  absl::StatusOr<WarmupTensors> wrong_type = MakeWarmupTensors(
      Batching(DType::kFloat32, {3}), Sample(v1::DataType::INT64, v1::WarmupInput::ZERO_DATA, 1), 2, "/nonexistent");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_EQ(wrong_type.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_type.status().message().find("warmup_samples[2]"), std::string::npos) << wrong_type.status();
  absl::StatusOr<WarmupTensors> wrong_dims = MakeWarmupTensors(
      Batching(DType::kFloat32, {4}), Sample(v1::DataType::FLOAT32, v1::WarmupInput::ZERO_DATA, 1), 0, "/nonexistent");
  ASSERT_FALSE(wrong_dims.ok());
  EXPECT_NE(wrong_dims.status().message().find("do not fit"), std::string::npos) << wrong_dims.status();
}

}  // namespace
}  // namespace infergate
