#pragma once
// What parsing a JSON text into a tree would cost, found by one pass over
// its bytes and no allocation, so a body can be refused (too deep) or
// charged to the in-flight budget (its tree) before it is parsed. A body of
// 64 MiB of '[' would otherwise build a tree some 75 times its size.
//
// The scan does not validate: a text it passes may still fail to parse.

#include <cstdint>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

struct JsonScan {
  uint64_t values = 0;   // scalars, arrays and objects (an upper bound)
  uint64_t members = 0;  // object members (key: value pairs)
  int max_depth = 0;     // deepest nesting of arrays and objects
  // Offset of the first NUL byte, which JSON text never holds raw (and at
  // which nlohmann's parser would end the document, ignoring what follows);
  // -1 when there is none.
  int64_t first_nul = -1;
  uint64_t strings = 0;      // string tokens (values and keys)
  uint64_t string_heap = 0;  // bytes of those too long for std::string's inline buffer, with their allocation
  // An estimate of the bytes the parsed tree holds: every value a 16-byte
  // node with array slack, each object member a map node with its key, and
  // each string its own heap object (a std::string and its allocation:
  // nlohmann keeps strings by pointer), plus its characters when they do
  // not fit inline. A million one-byte strings are some 112 MB of tree,
  // not the 4 MB of their text.
  uint64_t TreeBytes() const {
    return values * kTreeBytesPerValue + members * kTreeBytesPerMember + strings * kTreeBytesPerString + string_heap;
  }

  static constexpr uint64_t kTreeBytesPerValue = 64;
  static constexpr uint64_t kTreeBytesPerMember = 128;
  static constexpr uint64_t kTreeBytesPerString = 48;
  static constexpr uint64_t kInlineStringChars = 15;
};

JsonScan ScanJson(absl::string_view text);

// The deepest nesting a body may have: Triton's limit (100), which holds
// the request object, its `inputs`, a tensor, and a tensor's `data` nested
// as deep as any tensor's rank (64) with room to spare.
inline constexpr int kMaxJsonDepth = 100;

// INVALID_ARGUMENT naming `what` when `scan` nests deeper than
// kMaxJsonDepth or found a NUL byte.
absl::Status CheckScannedJson(const JsonScan& scan, absl::string_view what);

// `text` parsed, after the scan's checks; INVALID_ARGUMENT naming `what`
// when it is refused or is not JSON.
absl::StatusOr<nlohmann::json> ParseBoundedJson(absl::string_view text, absl::string_view what);

}  // namespace infergate
