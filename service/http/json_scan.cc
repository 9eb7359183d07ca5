#include "service/http/json_scan.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace infergate {

JsonScan ScanJson(absl::string_view text) {
  JsonScan scan;
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  uint64_t separators = 0;  // ',' outside strings: one more value each
  uint64_t containers = 0;
  uint64_t string_chars = 0;  // of the string being read
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\0' && scan.first_nul < 0) scan.first_nul = static_cast<int64_t>(i);
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
        ++scan.strings;
        // Escapes make the text longer than the string: an upper bound.
        if (string_chars > JsonScan::kInlineStringChars) scan.string_heap += string_chars + 1 + 16;
        continue;
      }
      ++string_chars;
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        string_chars = 0;
        break;
      case '[':
      case '{':
        ++containers;
        if (++depth > scan.max_depth) scan.max_depth = depth;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      case ',': ++separators; break;
      case ':': ++scan.members; break;
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
