#include "service/http/json_scan.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace infergate {

namespace {

// What a byte outside a string is to the scan. Most of a tensor's text is
// kPlain (digits, signs, points, spaces) or kComma, which are 0 and 1: one
// look-up, one well-predicted branch and an add for each (a branch per
// comma, one byte in seven of a list of floats, mispredicted often).
enum ByteClass : uint8_t { kPlain = 0, kComma = 1, kQuote, kOpen, kClose, kColon, kNul };

constexpr std::array<uint8_t, 256> kByteClasses = [] {
  std::array<uint8_t, 256> classes{};
  classes[static_cast<uint8_t>('"')] = kQuote;
  classes[static_cast<uint8_t>('[')] = kOpen;
  classes[static_cast<uint8_t>('{')] = kOpen;
  classes[static_cast<uint8_t>(']')] = kClose;
  classes[static_cast<uint8_t>('}')] = kClose;
  classes[static_cast<uint8_t>(',')] = kComma;
  classes[static_cast<uint8_t>(':')] = kColon;
  classes[0] = kNul;
  return classes;
}();

}  // namespace

JsonScan ScanJson(absl::string_view text) {
  JsonScan scan;
  int depth = 0;
  uint64_t separators = 0;  // ',' outside strings: one more value each
  uint64_t containers = 0;
  const size_t size = text.size();
  const char* const data = text.data();
  for (size_t i = 0; i < size; ++i) {
    const uint8_t byte_class = kByteClasses[static_cast<uint8_t>(data[i])];
    if (byte_class <= kComma) {
      separators += byte_class;
      continue;
    }
    switch (byte_class) {
      case kColon: ++scan.members; break;
      case kOpen:
        ++containers;
        if (++depth > scan.max_depth) scan.max_depth = depth;
        break;
      case kClose:
        if (depth > 0) --depth;
        break;
      case kNul:
        if (scan.first_nul < 0) scan.first_nul = static_cast<int64_t>(i);
        break;
      case kQuote: {
        // A string, to its closing quote (or the text's end).
        uint64_t string_chars = 0;
        bool closed = false;
        bool escaped = false;
        for (++i; i < size; ++i) {
          const char c = data[i];
          if (c == '\0' && scan.first_nul < 0) scan.first_nul = static_cast<int64_t>(i);
          if (c == '"' && !escaped) {
            closed = true;
            break;
          }
          ++string_chars;
          escaped = c == '\\' && !escaped;
        }
        if (closed) {
          ++scan.strings;
          // Escapes make the text longer than the string: an upper bound.
          if (string_chars > JsonScan::kInlineStringChars) scan.string_heap += string_chars + 1 + 16;
        }
        break;
      }
      default: break;
    }
  }
  // Every container holds at most separators + 1 values of its own; over
  // the whole text the values are at most the separators plus one per
  // container (its first value) plus the root, and the containers.
  scan.values = separators + 2 * containers + 1;
  return scan;
}

absl::Status CheckScannedJson(const JsonScan& scan, absl::string_view what) {
  if (scan.first_nul >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": a NUL byte at offset ", scan.first_nul, "; JSON text holds none"));
  }
  if (scan.max_depth <= kMaxJsonDepth) return absl::OkStatus();
  // Triton's words first (its clients and tests match them).
  return absl::InvalidArgumentError(absl::StrCat("JSON nesting depth exceeds maximum allowed limit (", kMaxJsonDepth,
                                                 "): ", what, " is nested ", scan.max_depth, " levels deep"));
}

absl::StatusOr<nlohmann::json> ParseBoundedJson(absl::string_view text, absl::string_view what) {
  // Refused before a tree is built: nesting no request needs (a tensor's
  // data is at most rank 8 deep) costs a node per level.
  RETURN_IF_ERROR(CheckScannedJson(ScanJson(text), what));
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not valid JSON: ", e.what()));
  }
}

}  // namespace infergate
