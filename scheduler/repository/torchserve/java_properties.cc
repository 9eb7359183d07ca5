#include "scheduler/repository/torchserve/java_properties.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace infergate {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\f'; }

// Whether the line ends in an odd number of backslashes (a continuation).
bool Continues(absl::string_view line) {
  size_t n = 0;
  while (n < line.size() && line[line.size() - 1 - n] == '\\') ++n;
  return n % 2 == 1;
}

// Appends the UTF-8 encoding of `code` (a BMP code point).
void AppendUtf8(uint32_t code, std::string& out) {
  if (code < 0x80) {
    out.push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code >> 6)));
    out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xE0 | (code >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }
}

// Unescapes `raw` (a key or value); `line` for messages.
absl::StatusOr<std::string> Unescape(absl::string_view raw, size_t line) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\\' || i + 1 == raw.size()) {
      out.push_back(raw[i]);
      continue;
    }
    const char c = raw[++i];
    switch (c) {
      case 't': out.push_back('\t'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 'f': out.push_back('\f'); break;
      case 'u': {
        uint32_t code = 0;
        if (i + 4 >= raw.size() || !absl::SimpleHexAtoi(raw.substr(i + 1, 4), &code)) {
          return absl::InvalidArgumentError(absl::StrCat("line ", line, ": a \\u escape needs four hex digits"));
        }
        AppendUtf8(code, out);
        i += 4;
        break;
      }
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> ParseJavaProperties(absl::string_view text) {
  std::map<std::string, std::string> out;
  size_t at = 0, line_number = 0;
  while (at < text.size()) {
    // One logical line: natural lines joined while they end in a continuation.
    std::string logical;
    const size_t first_line = line_number + 1;
    bool more = true;
    bool first = true;
    while (more && at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == absl::string_view::npos) end = text.size();
      absl::string_view natural = text.substr(at, end - at);
      at = end + 1;
      ++line_number;
      if (!natural.empty() && natural.back() == '\r') natural.remove_suffix(1);
      size_t lead = 0;
      while (lead < natural.size() && IsBlank(natural[lead])) ++lead;
      natural.remove_prefix(lead);
      if (first && (natural.empty() || natural[0] == '#' || natural[0] == '!')) break;  // blank or comment
      first = false;
      more = Continues(natural);
      if (more) natural.remove_suffix(1);
      absl::StrAppend(&logical, natural);
    }
    if (logical.empty()) continue;
    // The key ends at the first unescaped '=', ':' or blank.
    size_t k = 0;
    while (k < logical.size() && logical[k] != '=' && logical[k] != ':' && !IsBlank(logical[k])) {
      k += logical[k] == '\\' ? 2 : 1;
    }
    k = std::min(k, logical.size());
    size_t v = k;
    while (v < logical.size() && IsBlank(logical[v])) ++v;
    if (v < logical.size() && (logical[v] == '=' || logical[v] == ':')) ++v;
    while (v < logical.size() && IsBlank(logical[v])) ++v;
    absl::StatusOr<std::string> key = Unescape(absl::string_view(logical).substr(0, k), first_line);
    if (!key.ok()) return key.status();
    ASSIGN_OR_RETURN(out[*std::move(key)], Unescape(absl::string_view(logical).substr(v), first_line));
  }
  return out;
}

}  // namespace infergate
