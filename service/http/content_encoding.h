#pragma once
// Content-Encoding of request bodies (RFC 9110 section 8.4): what a REST
// client compressed, inflated before anything reads it. Triton's HTTP
// clients send `gzip` (RFC 1952) and `deflate` (the zlib format of RFC
// 1950; a raw deflate stream, which some clients send under that name, is
// accepted too); `identity` and no header leave the body as it is.
//
// The inflated size is bounded while it is produced: a first pass measures
// it through one fixed 256 KiB chunk, stopping with OUT_OF_RANGE as soon as
// the output would pass `max_bytes`; `account` is then told the exact size
// (the caller counts it against a memory budget, or stops with its own
// status), and a second pass fills a buffer allocated once at that size.
// A gzip bomb never holds more than the limit and a chunk; the price is
// inflating twice (zlib inflates hundreds of MB a second).
//
// Statuses: UNIMPLEMENTED for an encoding that is not served (HTTP 415),
// OUT_OF_RANGE past `max_bytes` (413), INVALID_ARGUMENT for data that is
// not what its encoding says (400), or `account`'s refusal.
//
// Threading: a pure function; call it from any thread.

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

// Whether a Content-Encoding header value asks for any decoding at all
// (not empty and not `identity`).
bool IsEncodedBody(absl::string_view content_encoding);

// The body decoded as `content_encoding` says.
absl::StatusOr<std::string> DecodeContentEncoding(absl::string_view content_encoding, absl::string_view body,
                                                  uint64_t max_bytes,
                                                  const std::function<absl::Status(uint64_t bytes)>& account = {});

}  // namespace infergate
