#pragma once
// BYTES tensors on the wire, without LibTorch (the fuzzer links it as it
// is): the Open Inference Protocol's serialized form, one element after
// another, each a 4-byte little-endian length then that many bytes. Also
// the form of Triton's warm-up data files for strings.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

// The `elements` strings in `bytes`, aliasing them. INVALID_ARGUMENT
// naming `data_field` and the element for a cut-off length prefix, a
// length longer than what remains, or bytes left after the last element.
// Refuses before allocating when `bytes` cannot hold `elements` prefixes.
absl::StatusOr<std::vector<absl::string_view>> ParseSerializedStrings(absl::string_view bytes, int64_t elements,
                                                                      absl::string_view data_field);

// Appends `s` in the serialized form (its length, then its bytes).
void AppendSerializedString(absl::string_view s, std::string* out);

// The serialized size of `strings`.
uint64_t SerializedSize(const std::vector<absl::string_view>& strings);

}  // namespace infergate
