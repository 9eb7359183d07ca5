#pragma once
// Wire tensors (raw little-endian bytes + dtype + shape) <-> LibTorch tensors.

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "infergate/v1/tensor.pb.h"
#include "service/call/wire_tensor.h"

namespace infergate {

// A CPU tensor over `wire`'s bytes. On a little-endian host with suitably
// aligned bytes it aliases them (no copy), so `wire` must outlive it.
// Errors are INVALID_ARGUMENT naming `field` ("inputs[2].shape[1]").
absl::StatusOr<at::Tensor> DecodeTensor(const v1::Tensor& wire, absl::string_view field,
                                        const CodecLimits& limits = {});

// Writes `tensor` (any device; any dtype the wire carries) into `wire`.
absl::Status EncodeTensor(const at::Tensor& tensor, absl::string_view name, v1::Tensor* wire);

// A CPU tensor of `dtype` and `shape` over `bytes`, already validated
// (ValidateRawBytes). Aliases them when it can, so they must outlive it.
// BYTES gives a string tensor (string_tensor.h) over the strings in them.
at::Tensor TensorOverBytes(DType dtype, const std::vector<int64_t>& shape, absl::string_view bytes);

// `tensor`'s elements as raw little-endian row-major bytes, and its dtype;
// a string tensor's in the serialized form (BYTES).
// INTERNAL naming `name` for a dtype the wire APIs cannot carry.
absl::StatusOr<DType> TensorBytes(const at::Tensor& tensor, absl::string_view name, std::string* out);

}  // namespace infergate
