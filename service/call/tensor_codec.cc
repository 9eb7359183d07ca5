#include "service/call/tensor_codec.h"

#include <ATen/ops/empty.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>

#include <bit>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/wire_strings.h"
#include "devices/torch_dtype.h"
#include "proto/proto_enums.h"
#include "scheduler/model/string_tensor.h"

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

// The tensor at::from_blob makes (a contiguous CPU tensor over `data` that
// neither owns nor may resize it), built directly. from_blob goes through
// LibTorch's global context and dispatch-key guards first; on a gRPC
// thread, whose caches hold no LibTorch code, that costs more than the
// tensor itself. `nbytes` must be the shape's element count times the
// dtype's width (the caller checked it).
at::Tensor CpuTensorOver(char* data, size_t nbytes, at::ScalarType dtype, const std::vector<int64_t>& shape) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, c10::DataPtr(data, c10::Device(c10::kCPU)),
                       /*allocator=*/nullptr, /*resizable=*/false);
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), caffe2::TypeMeta::fromScalarType(dtype));
  t.unsafeGetTensorImpl()->set_sizes_contiguous(shape);
  return t;
}

}  // namespace

at::Tensor TensorOverBytes(DType dtype, const std::vector<int64_t>& shape, absl::string_view bytes) {
  if (dtype == DType::kBytes) {
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    absl::StatusOr<std::vector<absl::string_view>> strings = ParseSerializedStrings(bytes, elements, "BYTES");
    TORCH_CHECK(strings.ok(), "unvalidated BYTES: ", strings.status().message());
    return StringTensorOver(*std::move(strings), shape);
  }
  const size_t width = ElementSize(dtype);
  const at::ScalarType scalar_type = ToScalarType(dtype);
  bool aligned = reinterpret_cast<uintptr_t>(bytes.data()) % width == 0;
  if (kLittleEndian && aligned && !bytes.empty()) {
    return CpuTensorOver(const_cast<char*>(bytes.data()), bytes.size(), scalar_type, shape);
  }
  at::Tensor owned = at::empty(shape, at::TensorOptions().dtype(scalar_type).device(at::kCPU));
  if (!bytes.empty()) {
    std::memcpy(owned.data_ptr(), bytes.data(), bytes.size());
    if (!kLittleEndian) SwapBytes(static_cast<char*>(owned.data_ptr()), bytes.size() / width, width);
  }
  return owned;
}

absl::StatusOr<at::Tensor> DecodeTensor(const v1::Tensor& wire, absl::string_view field, const CodecLimits& limits) {
  ASSIGN_OR_RETURN(WireTensorInfo info, ValidateWireTensor(wire, field, limits));
  return TensorOverBytes(info.dtype, info.shape, wire.data());
}

absl::StatusOr<DType> TensorBytes(const at::Tensor& tensor, absl::string_view name, std::string* out) {
  if (IsStringTensor(tensor)) {
    const std::vector<absl::string_view> strings = StringElements(tensor);
    out->clear();
    out->reserve(SerializedSize(strings));
    for (absl::string_view s : strings) AppendSerializedString(s, out);
    return DType::kBytes;
  }
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
  ASSIGN_OR_RETURN(DType dtype, TensorBytes(tensor, name, wire->mutable_data()));
  wire->set_name(std::string(name));
  wire->set_dtype(DTypeToProto(dtype));
  wire->mutable_shape()->Reserve(static_cast<int>(tensor.dim()));
  for (int64_t d : tensor.sizes()) wire->add_shape(d);
  return absl::OkStatus();
}

}  // namespace infergate
