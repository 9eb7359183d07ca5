#include "service/http/cross_origin.h"

#include <gtest/gtest.h>

namespace infergate {
namespace {

struct OriginCase {
  const char* what;
  const char* method;
  std::vector<std::pair<std::string, std::string>> headers;
  bool allowed;
};

const OriginCase kCases[] = {
    {"curl, SDKs and Triton's client send neither header", "POST", {{"host", "127.0.0.1:8000"}}, true},
    {"a page elsewhere POSTs text/plain (no preflight)",
     "POST",
     {{"host", "10.0.0.5:8000"}, {"origin", "https://evil.example"}, {"sec-fetch-site", "cross-site"}},
     false},
    {"an older browser: Origin alone, another site",
     "POST",
     {{"host", "10.0.0.5:8000"}, {"origin", "http://evil.example"}},
     false},
    {"a sandboxed page or a file", "POST", {{"host", "10.0.0.5:8000"}, {"origin", "null"}}, false},
    {"a sibling subdomain is still another origin",
     "DELETE",
     {{"host", "infer.corp:8000"}, {"origin", "http://wiki.corp:8000"}, {"sec-fetch-site", "same-site"}},
     false},
    {"a page served by infergate's own origin",
     "POST",
     {{"host", "10.0.0.5:8000"}, {"origin", "http://10.0.0.5:8000"}, {"sec-fetch-site", "same-origin"}},
     true},
    {"typed into the address bar", "POST", {{"host", "10.0.0.5:8000"}, {"sec-fetch-site", "none"}}, true},
    {"reading is left alone", "GET", {{"host", "10.0.0.5:8000"}, {"origin", "https://evil.example"}}, true},
    {"the Host's case does not matter",
     "POST",
     {{"host", "Infer.Corp:8000"}, {"origin", "http://infer.corp:8000"}},
     true},
};

TEST(CrossOrigin, UnsafeRequestsFromOtherSitesAreRefused) {
  for (const OriginCase& c : kCases) {
    HttpRequest request;
    request.method = c.method;
    request.headers = c.headers;
    absl::Status s = CheckSameOrigin(request);
    EXPECT_EQ(s.ok(), c.allowed) << c.what << ": " << s;
    if (!c.allowed) {
      EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << c.what;
      EXPECT_NE(s.message().find("cross-origin request refused"), absl::string_view::npos) << c.what;
    }
  }
}

}  // namespace
}  // namespace infergate
