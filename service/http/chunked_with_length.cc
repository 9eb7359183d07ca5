#include "service/http/chunked_with_length.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace infergate {

std::optional<std::string> DropLengthBesideChunked(absl::string_view fields) {
  const size_t end = fields.find("\r\n\r\n");
  if (end == absl::string_view::npos) return std::nullopt;
  int transfer_encodings = 0;
  int lengths = 0;
  bool chunked_last = false;
  std::string kept;
  kept.reserve(fields.size());
  // Each field line, its "\r\n" included.
  for (size_t at = 0; at < end + 2;) {
    const size_t eol = fields.find("\r\n", at);
    const absl::string_view line = fields.substr(at, eol + 2 - at);
    at = eol + 2;
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) return std::nullopt;  // not a field (Beast refuses it anyway)
    const absl::string_view name = line.substr(0, colon);
    if (absl::EqualsIgnoreCase(name, "content-length")) {
      ++lengths;
      continue;
    }
    if (absl::EqualsIgnoreCase(name, "transfer-encoding")) {
      ++transfer_encodings;
      const std::vector<absl::string_view> codings =
          absl::StrSplit(line.substr(colon + 1, line.size() - colon - 3), ',');
      chunked_last = absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(codings.back()), "chunked");
    }
    kept.append(line.data(), line.size());
  }
  if (transfer_encodings != 1 || !chunked_last || lengths == 0) return std::nullopt;
  kept.append(fields.substr(end + 2).data(), fields.size() - end - 2);  // the blank line and the body's start
  return kept;
}

}  // namespace infergate
