#include "service/http/cross_origin.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace infergate {
namespace {

absl::Status Refused(absl::string_view why) {
  return absl::PermissionDeniedError(
      absl::StrCat("cross-origin request refused (", why,
                   "): infergate answers no CORS; call it from a program, or from a page served by the same origin"));
}

}  // namespace

absl::Status CheckSameOrigin(const HttpRequest& request) {
  if (request.method == "GET" || request.method == "HEAD") return absl::OkStatus();
  const absl::string_view site = request.Header("sec-fetch-site");
  if (!site.empty() && site != "same-origin" && site != "none") {
    return Refused(absl::StrCat("Sec-Fetch-Site: ", site.substr(0, 32)));
  }
  absl::string_view origin = request.Header("origin");
  if (origin.empty()) return absl::OkStatus();  // not a browser, or a same-origin GET
  // "scheme://host[:port]": its host and port must be what the request was
  // sent to. ("null" comes from sandboxed pages and files: never ours.)
  absl::string_view authority = origin;
  if (!absl::ConsumePrefix(&authority, "http://") && !absl::ConsumePrefix(&authority, "https://")) {
    return Refused(absl::StrCat("Origin: ", origin.substr(0, 64)));
  }
  const absl::string_view host = request.Header("host");
  if (host.empty() || !absl::EqualsIgnoreCase(authority, host)) {
    return Refused(absl::StrCat("Origin ", origin.substr(0, 64), " is not the Host ", host.substr(0, 64)));
  }
  return absl::OkStatus();
}

}  // namespace infergate
