#include "service/http/multipart_form.h"

#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace infergate {
namespace {

constexpr size_t kMaxBoundaryBytes = 70;  // RFC 2046

// The value of parameter `name` in a header value ("...; name=value" or
// name="value"); "" when absent.
std::string HeaderParameter(absl::string_view header, absl::string_view name) {
  for (absl::string_view part : absl::StrSplit(header, ';')) {
    part = absl::StripAsciiWhitespace(part);
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos ||
        !absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(part.substr(0, eq)), name)) {
      continue;
    }
    absl::string_view value = absl::StripAsciiWhitespace(part.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    return std::string(value);
  }
  return "";
}

}  // namespace

bool IsMultipartForm(absl::string_view content_type) {
  return absl::StartsWithIgnoreCase(absl::StripAsciiWhitespace(content_type), "multipart/form-data");
}

absl::StatusOr<absl::string_view> MultipartFormField(absl::string_view content_type, absl::string_view body) {
  const std::string boundary = HeaderParameter(content_type, "boundary");
  if (boundary.empty() || boundary.size() > kMaxBoundaryBytes) {
    return absl::InvalidArgumentError("Content-Type: multipart/form-data needs a boundary of 1 to 70 characters");
  }
  const std::string delimiter = absl::StrCat("--", boundary);
  size_t at = body.find(delimiter);
  if (at == absl::string_view::npos) {
    return absl::InvalidArgumentError("the multipart body does not contain its boundary");
  }
  // Read part by part, holding nothing per part: the "data" field ends
  // the reading; "body" and the first field are kept in case none follows.
  // More than kMaxMultipartParts parts is refused (millions of empty parts
  // would otherwise cost a second of this thread).
  const std::string closing = absl::StrCat("\r\n", delimiter);
  std::optional<absl::string_view> first;
  std::optional<absl::string_view> body_field;
  size_t parts = 0;
  while (true) {
    at += delimiter.size();
    if (body.substr(at, 2) == "--") break;  // the closing delimiter
    if (body.substr(at, 2) != "\r\n")
      return absl::InvalidArgumentError("the multipart body is malformed after a boundary");
    if (++parts > kMaxMultipartParts) {
      return absl::InvalidArgumentError(
          absl::StrCat("the multipart body has more than ", kMaxMultipartParts, " parts"));
    }
    at += 2;
    const size_t headers_end = body.find("\r\n\r\n", at);
    if (headers_end == absl::string_view::npos) {
      return absl::InvalidArgumentError("a part of the multipart body has no end to its headers");
    }
    std::string name;
    for (absl::string_view line : absl::StrSplit(body.substr(at, headers_end - at), "\r\n")) {
      const size_t colon = line.find(':');
      if (colon != absl::string_view::npos &&
          absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(line.substr(0, colon)), "content-disposition")) {
        name = HeaderParameter(line.substr(colon + 1), "name");
      }
    }
    const size_t content_at = headers_end + 4;
    const size_t next = body.find(closing, content_at);
    if (next == absl::string_view::npos) {
      return absl::InvalidArgumentError("a part of the multipart body is not closed by its boundary");
    }
    const absl::string_view content = body.substr(content_at, next - content_at);
    if (name == "data") return content;
    if (name == "body" && !body_field) body_field = content;
    if (!first) first = content;
    at = next + 2;
  }
  if (body_field) return *body_field;
  if (!first) return absl::InvalidArgumentError("the multipart body has no fields");
  return *first;
}

}  // namespace infergate
