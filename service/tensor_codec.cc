#include "absl/strings/string_view.h"
#include "service/tensor_codec.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <bit>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "devices/torch_dtype.h"
#include "wire/proto_enums.h"

namespace infergate {
namespace {

// Reverses each element's bytes; used only on big-endian hosts.
void SwapBytes(char* data, size_t count, size_t width) {
  for (size_t i = 0; i < count; ++i) {
    char* e = data + i * width;
    for (size_t a = 0, b = width - 1; a < b; ++a, --b) std::swap(e[a], e[b]);
  }
}

constexpr bool kLittleEndian = std::endian::native == std::endian::little;

}  // namespace

at::Tensor TensorOverBytes(DType dtype, const std::vector<int64_t>& shape, absl::string_view bytes) {
  const size_t width = ElementSize(dtype);
  auto options = at::TensorOptions().dtype(ToScalarType(dtype)).device(at::kCPU);
  bool aligned = reinterpret_cast<uintptr_t>(bytes.data()) % width == 0;
  if (kLittleEndian && aligned && !bytes.empty()) {
    return at::from_blob(const_cast<char*>(bytes.data()), shape, options);
  }
  at::Tensor owned = at::empty(shape, options);
  if (!bytes.empty()) {
    std::memcpy(owned.data_ptr(), bytes.data(), bytes.size());
    if (!kLittleEndian) SwapBytes(static_cast<char*>(owned.data_ptr()), bytes.size() / width, width);
  }
  return owned;
}

absl::StatusOr<at::Tensor> DecodeTensor(const v1::Tensor& wire, absl::string_view field, const CodecLimits& limits) {
  absl::StatusOr<WireTensorInfo> info = ValidateWireTensor(wire, field, limits);
  if (!info.ok()) return info.status();
  return TensorOverBytes(info->dtype, info->shape, wire.data());
}

absl::StatusOr<DType> TensorBytes(const at::Tensor& tensor, absl::string_view name, std::string* out) {
  std::optional<DType> dtype = FromScalarType(tensor.scalar_type());
  if (!dtype) {
    return absl::InternalError(absl::StrCat("output '", name, "' has dtype ", c10::toString(tensor.scalar_type()),
                                            " which the wire API cannot carry"));
  }
  at::Tensor cpu = tensor.device().is_cpu() ? tensor.contiguous() : tensor.to(at::kCPU).contiguous();
  size_t nbytes = cpu.numel() * cpu.element_size();
  out->resize(nbytes);
  if (nbytes > 0) {
    std::memcpy(out->data(), cpu.data_ptr(), nbytes);
    if (!kLittleEndian) SwapBytes(out->data(), cpu.numel(), cpu.element_size());
  }
  return *dtype;
}

absl::Status EncodeTensor(const at::Tensor& tensor, absl::string_view name, v1::Tensor* wire) {
  absl::StatusOr<DType> dtype = TensorBytes(tensor, name, wire->mutable_data());
  if (!dtype.ok()) return dtype.status();
  wire->set_name(std::string(name));
  wire->set_dtype(DTypeToProto(*dtype));
  wire->mutable_shape()->Reserve(static_cast<int>(tensor.dim()));
  for (int64_t d : tensor.sizes()) wire->add_shape(d);
  return absl::OkStatus();
}

}  // namespace infergate
