// Triton's reshape around a servable: the model receives reshape.shape for
// what clients send as dims, and its outputs go back as dims; variable
// dimensions take the sizes this request gave them.
#include "scheduler/model/reshaped_servable.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace infergate {
namespace {

// Records the shapes it ran on; answers `out` (a model-shaped output).
class ShapeRecorder final : public Servable {
 public:
  explicit ShapeRecorder(InputSignature signature, std::vector<int64_t> out_shape)
      : signature_(std::move(signature)), out_shape_(std::move(out_shape)) {}
  absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<at::Tensor>& inputs) const override {
    seen.clear();
    for (const at::Tensor& t : inputs) seen.push_back(t.sizes().vec());
    return std::vector<NamedTensor>{{"y", at::arange(inputs[0].numel(), at::kFloat).reshape(out_shape_)}};
  }
  const InputSignature& signature() const override { return signature_; }
  DType compute_dtype() const override { return DType::kFloat32; }
  uint64_t resident_bytes() const override { return 0; }
  mutable std::vector<std::vector<int64_t>> seen;

 private:
  InputSignature signature_;
  std::vector<int64_t> out_shape_;
};

v1::ModelConfig ReshapeConfig(int max_batch_size) {
  v1::ModelConfig c;
  c.set_name("m");
  c.set_max_batch_size(max_batch_size);
  v1::TensorSpec* in = c.add_inputs();
  in->set_name("x");
  in->set_dtype(v1::FLOAT32);
  for (int64_t d : {2, 4, -1, 6}) in->add_dims(d);
  for (int64_t d : {8, -1, 1, 6}) in->mutable_reshape()->add_shape(d);
  v1::TensorSpec* out = c.add_outputs();
  out->set_name("y");
  out->set_dtype(v1::FLOAT32);
  for (int64_t d : {2, 4, -1, 6}) out->add_dims(d);
  for (int64_t d : {8, -1, 1, 6}) out->mutable_reshape()->add_shape(d);
  return c;
}

TEST(ReshapedServable, TheModelSeesReshapeAndClientsDims) {
  InputSignature sig;
  sig.max_batch_size = 4;
  sig.inputs.push_back({"x", DType::kFloat32, std::vector<int64_t>{2, 4, -1, 6}});
  auto inner = std::make_shared<ShapeRecorder>(sig, std::vector<int64_t>{3, 8, 5, 1, 6});
  std::shared_ptr<Servable> wrapped = ReshapedServable::Wrap(inner, ReshapeConfig(4));
  ASSERT_NE(wrapped.get(), inner.get());
  // A batch of 3, the variable dimension 5 in this request.
  absl::StatusOr<std::vector<NamedTensor>> out = wrapped->Run({at::zeros({3, 2, 4, 5, 6})});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(inner->seen.size(), 1u);
  EXPECT_EQ(inner->seen[0], (std::vector<int64_t>{3, 8, 5, 1, 6}));
  EXPECT_EQ((*out)[0].tensor.sizes().vec(), (std::vector<int64_t>{3, 2, 4, 5, 6}));
  // Row-major order is kept: reshaping moves no element.
  EXPECT_EQ((*out)[0].tensor.flatten()[37].item<float>(), 37.0f);
}

TEST(ReshapedServable, WithoutAReshapeTheServableIsItself) {
  v1::ModelConfig c;
  c.add_inputs()->set_name("x");
  auto inner = std::make_shared<ShapeRecorder>(InputSignature{}, std::vector<int64_t>{1});
  EXPECT_EQ(ReshapedServable::Wrap(inner, c).get(), inner.get());
}

TEST(ReshapedServable, AShapeThatDoesNotFollowDimsIsRefusedNamingTheInput) {
  absl::StatusOr<at::Tensor> bad =
      ReshapedServable::Reshape(at::zeros({3, 2, 4}), {2, 4, -1, 6}, {8, -1, 1, 6}, true, "model 'm' input 0");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("model 'm' input 0"), std::string::npos) << bad.status();
  // A scalar per batch row (Triton's empty reshape).
  absl::StatusOr<at::Tensor> scalar = ReshapedServable::Reshape(at::zeros({5, 1}), {1}, {}, true, "x");
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(scalar->sizes().vec(), (std::vector<int64_t>{5}));
}

}  // namespace
}  // namespace infergate
