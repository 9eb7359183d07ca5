#pragma once
// Whether an HTTP request that changes something came from another web
// site's page: a pure function of its method and headers.
//
// A page on any site can make a visitor's browser POST to infergate (a
// "simple" request, text/plain, needs no CORS preflight), and on a server
// without tokens that request would run: load or unload models, run
// inference. Browsers say where such a request comes from (`Sec-Fetch-Site`,
// `Origin`); clients that are not browsers (curl, SDKs, Triton's client)
// send neither. infergate serves no CORS, so every unsafe request a browser
// marks as cross-site, or whose Origin is not the Host it was sent to, is
// refused with PERMISSION_DENIED. Reading (GET, HEAD) is left alone: the
// browser keeps the answer from the page anyway.

#include <string>

#include "absl/status/status.h"
#include "service/http/http_server.h"

namespace infergate {

// OK, or PERMISSION_DENIED saying which header showed the request to be
// cross-origin.
absl::Status CheckSameOrigin(const HttpRequest& request);

}  // namespace infergate
