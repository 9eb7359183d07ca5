#pragma once
// Checks a wire tensor's dtype, shape and byte count against each other and
// the limits, without LibTorch (so the fuzzer and the codecs share it). Both
// wire APIs (infergate.v1 and the Open Inference Protocol) use it.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "devices/dtype.h"
#include "infergate/v1/tensor.pb.h"

namespace infergate {

struct CodecLimits {
  // The most elements any tensor may have whatever the limit says: 2^60, so
  // a count times any element size (at most 8 bytes) fits in 64 bits.
  static constexpr int64_t kElementsCeiling = int64_t{1} << 60;
  int max_rank = 8;
  int64_t max_elements = int64_t{1} << 31;  // held to kElementsCeiling
  // The most input (and requested output) tensors one request may carry.
  // Checked before any is decoded: millions of tiny tensors would
  // otherwise cost gigabytes of bookkeeping for a request no model takes.
  int max_tensors = 1024;
  // The most string elements one request may carry, all its BYTES tensors
  // together (--max-string-elements): each is an object of its own once
  // parsed, whatever its length, so they are counted on the wire before
  // anything is parsed.
  int64_t max_string_elements = int64_t{1} << 20;
  // The most bytes of model files one load may carry (Triton's file:
  // parameters); 0 (the default) refuses them.
  uint64_t max_load_file_bytes = 0;
  // Whether those files may be native code (a .pt2, a shared library).
  bool allow_native_uploads = false;
};

// INVALID_ARGUMENT naming `field` ("inputs") when `count` tensors are more
// than `limits` allow.
absl::Status CheckTensorCount(int64_t count, absl::string_view field, const CodecLimits& limits);

struct WireTensorInfo {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  int64_t elements = 0;
};

// INVALID_ARGUMENT naming `field` ("inputs[2].shape[1]") for an unknown
// dtype, a rank over the limit, negative or overflowing dims, a byte count
// that does not match the shape, or BOOL bytes other than 0 and 1.
absl::StatusOr<WireTensorInfo> ValidateWireTensor(const v1::Tensor& wire, absl::string_view field,
                                                  const CodecLimits& limits = {});

// The shape checks alone: rank, no negative dims, and the element count
// within the limit, where a zero-size dim does not switch the limit off
// (the product of the non-zero dims is held to it). Returns the count.
absl::StatusOr<int64_t> ValidateShape(const std::vector<int64_t>& shape, absl::string_view field,
                                      const CodecLimits& limits);

// Triton's refusals of a shape whose element count, or byte count at
// `element_size` bytes each (0: strings, not checked), passes INT64_MAX,
// in Triton's words ("invalid shape for input 'x': shape [..] causes total
// element count to exceed maximum size of ..."; "byte size overflow for
// input 'x': ..."). OK for anything else, negative dims included (which
// ValidateShape refuses); the element limit is ValidateShape's.
absl::Status CheckShapeFitsInt64(const std::vector<int64_t>& shape, size_t element_size, absl::string_view input);

// Raw element bytes for `elements` values of `dtype`: the byte count, and
// BOOL bytes of 0 or 1; for BYTES, the serialized strings (wire_strings.h). `data_field` names where the bytes came
// from.
absl::Status ValidateRawBytes(DType dtype, int64_t elements, const std::vector<int64_t>& shape, absl::string_view bytes,
                              absl::string_view data_field);

}  // namespace infergate
