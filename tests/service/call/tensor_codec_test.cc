#include "service/call/tensor_codec.h"

#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cstring>

#include "devices/dtype.h"
#include "devices/torch_dtype.h"
#include "scheduler/repository/model_config.h"
#include "service/call/wire_tensor.h"

namespace infergate {
namespace {

v1::Tensor Wire(v1::DataType dtype, std::vector<int64_t> shape, std::string data) {
  v1::Tensor t;
  t.set_name("x");
  t.set_dtype(dtype);
  for (int64_t d : shape) t.add_shape(d);
  t.set_data(std::move(data));
  return t;
}

TEST(TensorCodec, EveryDTypeRoundTrips) {
  for (DType d : kAllDTypes) {
    at::Tensor original = at::arange(24, at::TensorOptions().dtype(at::kFloat)).reshape({2, 3, 4});
    if (d == DType::kBool) {
      original = original.remainder(2).to(at::kBool);
    } else {
      original = original.to(ToScalarType(d));
    }
    v1::Tensor wire;
    ASSERT_TRUE(EncodeTensor(original, "t", &wire).ok()) << DTypeName(d);
    EXPECT_EQ(wire.dtype(), DTypeToProto(d));
    EXPECT_EQ(wire.shape_size(), 3);
    EXPECT_EQ(wire.data().size(), 24 * ElementSize(d)) << DTypeName(d);
    auto back = DecodeTensor(wire, "inputs[0]");
    ASSERT_TRUE(back.ok()) << DTypeName(d) << ": " << back.status();
    EXPECT_EQ(back->scalar_type(), ToScalarType(d));
    EXPECT_EQ(back->sizes(), original.sizes());
    EXPECT_TRUE(at::equal(*back, original)) << DTypeName(d);
  }
}

TEST(TensorCodec, BytesAreLittleEndianRowMajor) {
  float values[] = {1.5f, -2.0f, 3.25f, 0.0f, 8.0f, -0.5f};
  std::string bytes(reinterpret_cast<const char*>(values), sizeof(values));
  v1::Tensor wire = Wire(v1::FLOAT32, {2, 3}, bytes);  // the tensor aliases it
  auto t = DecodeTensor(wire, "inputs[0]");
  ASSERT_TRUE(t.ok());
  EXPECT_FLOAT_EQ((*t)[1][0].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ((*t)[0][2].item<float>(), 3.25f);
  EXPECT_FLOAT_EQ((*t)[1][2].item<float>(), -0.5f);
}

TEST(TensorCodec, DecodingDoesNotCopyAlignedBytes) {
  v1::Tensor wire = Wire(v1::FLOAT32, {64}, std::string(256, '\0'));
  auto t = DecodeTensor(wire, "inputs[0]");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->data_ptr(), static_cast<const void*>(wire.data().data()));
}

// The aliasing tensor is built without at::from_blob; it must be the tensor
// from_blob would make, whatever the dtype and rank.
TEST(TensorCodec, AliasingTensorIsTheOneFromBlobMakes) {
  for (DType d : kAllDTypes) {
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{}, {7}, {2, 3}, {2, 1, 4}}) {
      int64_t elements = 1;
      for (int64_t dim : shape) elements *= dim;
      v1::Tensor wire = Wire(DTypeToProto(d), shape, std::string(elements * ElementSize(d), '\x01'));
      absl::StatusOr<at::Tensor> t = DecodeTensor(wire, "inputs[0]");
      ASSERT_TRUE(t.ok()) << t.status();
      at::Tensor blob =
          at::from_blob(const_cast<char*>(wire.data().data()), shape, at::TensorOptions().dtype(ToScalarType(d)));
      SCOPED_TRACE(::testing::Message() << DTypeName(d) << " rank " << shape.size());
      EXPECT_EQ(t->sizes(), blob.sizes());
      EXPECT_EQ(t->strides(), blob.strides());
      EXPECT_EQ(t->scalar_type(), blob.scalar_type());
      EXPECT_EQ(t->device(), blob.device());
      EXPECT_EQ(t->key_set(), blob.key_set());
      EXPECT_EQ(t->storage_offset(), 0);
      EXPECT_EQ(t->storage().nbytes(), blob.storage().nbytes());
      EXPECT_FALSE(t->storage().resizable());
      EXPECT_TRUE(t->is_contiguous());
      EXPECT_FALSE(t->requires_grad());
      EXPECT_TRUE(at::equal(*t, blob));
    }
  }
  // Ops that allocate from it, inside and outside inference mode, and a
  // resize, which must be refused rather than reallocate over the request.
  v1::Tensor wire = Wire(v1::FLOAT32, {2, 2}, std::string(16, '\0'));
  absl::StatusOr<at::Tensor> t = DecodeTensor(wire, "inputs[0]");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(at::equal(t->add(1).sum(), at::full({}, 4.0f)));
  {
    c10::InferenceMode guard;
    EXPECT_TRUE(at::equal(at::cat({*t, *t}, 0), at::zeros({4, 2})));
  }
  EXPECT_ANY_THROW(t->resize_({64, 64}));
  EXPECT_EQ(t->data_ptr(), static_cast<const void*>(wire.data().data()));
}

TEST(TensorCodec, ScalarsAndEmptyTensors) {
  double one = 1.0;
  v1::Tensor scalar_wire = Wire(v1::FLOAT64, {}, std::string(reinterpret_cast<char*>(&one), 8));
  auto scalar = DecodeTensor(scalar_wire, "inputs[0]");
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(scalar->dim(), 0);
  EXPECT_DOUBLE_EQ(scalar->item<double>(), 1.0);
  auto empty = DecodeTensor(Wire(v1::INT64, {0, 5}, ""), "inputs[0]");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->numel(), 0);
}

struct Bad {
  const char* what;
  v1::Tensor wire;
  const char* field;
};

TEST(TensorCodec, BadTensorsNameTheirField) {
  std::vector<Bad> cases = {
      {"unset dtype", Wire(v1::DATA_TYPE_UNSPECIFIED, {1}, "abcd"), "inputs[3].dtype"},
      {"unknown dtype", Wire(static_cast<v1::DataType>(42), {1}, "abcd"), "inputs[3].dtype"},
      {"short data", Wire(v1::FLOAT32, {2, 2}, std::string(15, 'a')), "inputs[3].data"},
      {"long data", Wire(v1::FLOAT32, {2, 2}, std::string(17, 'a')), "inputs[3].data"},
      {"negative dim", Wire(v1::FLOAT32, {2, -2}, ""), "inputs[3].shape[1]"},
      {"absurd dims", Wire(v1::FLOAT32, {int64_t{1} << 40, int64_t{1} << 40}, ""), "inputs[3].shape"},
      {"overflowing dims", Wire(v1::INT8, {INT64_MAX, 2}, ""), "inputs[3].shape"},
      {"rank too high", Wire(v1::INT8, {1, 1, 1, 1, 1, 1, 1, 1, 1}, "a"), "inputs[3].shape"},
      {"bool not 0/1", Wire(v1::BOOL, {2}, std::string("\x01\x07", 2)), "inputs[3].data"},
  };
  for (const Bad& b : cases) {
    auto t = DecodeTensor(b.wire, "inputs[3]");
    ASSERT_FALSE(t.ok()) << b.what;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << b.what;
    EXPECT_NE(t.status().message().find(b.field), absl::string_view::npos) << b.what << ": " << t.status();
  }
}

TEST(TensorCodec, ElementLimitIsAFlag) {
  CodecLimits limits;
  limits.max_elements = 10;
  auto t = DecodeTensor(Wire(v1::INT8, {11}, std::string(11, '\0')), "inputs[0]", limits);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(DecodeTensor(Wire(v1::INT8, {10}, std::string(10, '\0')), "inputs[0]", limits).ok());
}

// At the limits: an element limit of 2^62 or more (a flag once allowed it)
// still holds every tensor to 2^60 elements, so no byte count overflows; the
// largest shapes answer INVALID_ARGUMENT with the count, never a crash.
TEST(TensorCodec, ByteCountsCannotOverflowWhateverTheLimit) {
  CodecLimits limits;
  limits.max_elements = INT64_MAX;
  for (std::vector<int64_t> shape : {std::vector<int64_t>{int64_t{1} << 61},
                                     {int64_t{1} << 31, int64_t{1} << 30},
                                     {INT64_MAX},
                                     {int64_t{1} << 60, 2}}) {
    absl::StatusOr<int64_t> n = ValidateShape(shape, "inputs[0]", limits);
    EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument) << shape[0];
    auto t = DecodeTensor(Wire(v1::FLOAT64, shape, std::string(8, '\0')), "inputs[0]", limits);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << shape[0];
  }
  EXPECT_EQ(*ValidateShape({CodecLimits::kElementsCeiling}, "inputs[0]", limits), CodecLimits::kElementsCeiling);
  // Exactly the ceiling of 8-byte values: the byte count (2^63) still fits
  // an unsigned 64-bit count, and the bytes given (8) are refused as too few.
  auto t = DecodeTensor(Wire(v1::FLOAT64, {CodecLimits::kElementsCeiling}, std::string(8, '\0')), "inputs[0]", limits);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("needs 9223372036854775808"), std::string::npos) << t.status();
}

TEST(TensorCodec, EncodesNonContiguousTensors) {
  at::Tensor t = at::arange(6, at::TensorOptions().dtype(at::kFloat)).reshape({2, 3}).t();
  v1::Tensor wire;
  ASSERT_TRUE(EncodeTensor(t, "y", &wire).ok());
  auto back = DecodeTensor(wire, "outputs[0]");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(at::equal(*back, t.contiguous()));
  EXPECT_EQ(wire.name(), "y");
}

}  // namespace
}  // namespace infergate
