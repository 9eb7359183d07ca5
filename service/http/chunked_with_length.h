#pragma once
// A request that frames its body twice: `Transfer-Encoding: chunked` and a
// `Content-Length` (some clients add the length to a body they send
// chunked). RFC 9112 (section 6.3) lets a server take such a request by its
// chunked coding, ignoring the length, and close the connection once it has
// answered; Triton takes it so. Boost.Beast's parser refuses the pair, so
// the HTTP server mends the head and parses it again (http_server.cc).
//
// Only that pair is mended: one Transfer-Encoding header whose last coding
// is chunked, beside one or more Content-Length headers. Anything else
// Beast refused (two Transfer-Encodings, a coding other than chunked last,
// a bad length alone) stays refused, so nothing that could smuggle a second
// request past a proxy is let through.
//
// A pure function.

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace infergate {

// `fields`: a request head's field lines, from the first field through the
// blank line that ends the head ("Host: x\r\n...\r\n\r\n"), and any bytes
// after it (the body's start), which are kept. The same without its
// Content-Length lines when the fields are the pair above; nullopt
// otherwise (also when the head's end is not in `fields`).
std::optional<std::string> DropLengthBesideChunked(absl::string_view fields);

}  // namespace infergate
