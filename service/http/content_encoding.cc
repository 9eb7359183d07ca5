#include "service/http/content_encoding.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace infergate {
namespace {

constexpr size_t kChunk = size_t{256} << 10;

enum class Format { kGzip, kZlib, kRawDeflate };

// zlib's windowBits for each format (zlib.h, inflateInit2).
int WindowBits(Format format) {
  switch (format) {
    case Format::kGzip: return 15 + 16;
    case Format::kZlib: return 15;
    case Format::kRawDeflate: return -15;
  }
  return 15;
}

// One pass of inflating `body`: each piece of output goes to `take` (at
// most kChunk bytes at a time, in order). Stops with OUT_OF_RANGE once the
// output passes `max_bytes`; returns the inflated size.
absl::StatusOr<uint64_t> InflatePass(Format format, absl::string_view body, absl::string_view encoding,
                                     uint64_t max_bytes, const std::function<void(const char*, size_t)>& take) {
  z_stream z{};
  if (inflateInit2(&z, WindowBits(format)) != Z_OK) {
    return absl::InternalError(absl::StrCat("Content-Encoding: ", encoding, ": zlib could not start"));
  }
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  std::vector<char> chunk(kChunk);
  uint64_t total = 0;
  absl::string_view rest = body;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    // zlib counts in uInt: feed the input in pieces it can hold.
    if (z.avail_in == 0 && !rest.empty()) {
      const size_t n = std::min<size_t>(rest.size(), 1u << 30);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(rest.data()));
      z.avail_in = static_cast<uInt>(n);
      rest.remove_prefix(n);
    }
    z.next_out = reinterpret_cast<Bytef*>(chunk.data());
    z.avail_out = static_cast<uInt>(chunk.size());
    rc = inflate(&z, Z_NO_FLUSH);
    const size_t produced = chunk.size() - z.avail_out;
    total += produced;
    if (total > max_bytes) {
      return absl::OutOfRangeError(absl::StrCat("Content-Encoding: ", encoding,
                                                ": the body inflates to more than the server's limit of ", max_bytes,
                                                " bytes"));
    }
    if (produced > 0 && take) take(chunk.data(), produced);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && rest.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Content-Encoding: ", encoding, ": the body ends before its compressed stream does"));
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return absl::InvalidArgumentError(absl::StrCat("Content-Encoding: ", encoding, ": the body is not valid ",
                                                     encoding, " data (", z.msg ? z.msg : "zlib error", ")"));
    }
  }
  if (z.avail_in != 0 || !rest.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Content-Encoding: ", encoding, ": the body has bytes after its compressed stream"));
  }
  return total;
}

// Two passes, so that the output is allocated once at its exact size: the
// first only measures (through one fixed chunk, stopping past the limit),
// the second fills. A growing string would double its capacity, and a gzip
// bomb's peak with it; this way the peak is the inflated size itself, at
// most the limit, charged to `account` before it is allocated.
absl::StatusOr<std::string> Inflate(Format format, absl::string_view body, absl::string_view encoding,
                                    uint64_t max_bytes, const std::function<absl::Status(uint64_t)>& account) {
  ASSIGN_OR_RETURN(uint64_t size, InflatePass(format, body, encoding, max_bytes, {}));
  if (account) {
    RETURN_IF_ERROR(account(size));
  }
  std::string out(size, '\0');
  size_t at = 0;
  absl::StatusOr<uint64_t> filled = InflatePass(format, body, encoding, size, [&](const char* data, size_t n) {
    std::memcpy(out.data() + at, data, n);
    at += n;
  });
  if (!filled.ok()) return filled.status();
  return out;
}

}  // namespace

bool IsEncodedBody(absl::string_view content_encoding) {
  absl::string_view e = absl::StripAsciiWhitespace(content_encoding);
  return !e.empty() && !absl::EqualsIgnoreCase(e, "identity");
}

absl::StatusOr<std::string> DecodeContentEncoding(absl::string_view content_encoding, absl::string_view body,
                                                  uint64_t max_bytes,
                                                  const std::function<absl::Status(uint64_t bytes)>& account) {
  const absl::string_view e = absl::StripAsciiWhitespace(content_encoding);
  if (!IsEncodedBody(e)) return std::string(body);
  if (absl::EqualsIgnoreCase(e, "gzip") || absl::EqualsIgnoreCase(e, "x-gzip")) {
    return Inflate(Format::kGzip, body, "gzip", max_bytes, account);
  }
  if (absl::EqualsIgnoreCase(e, "deflate")) {
    // RFC 9110 means the zlib format; a raw deflate stream has no zlib
    // header (its first two bytes are not a multiple of 31 with method 8).
    const bool zlib_header =
        body.size() >= 2 && (static_cast<unsigned char>(body[0]) & 0x0f) == 8 &&
        ((static_cast<unsigned char>(body[0]) << 8) | static_cast<unsigned char>(body[1])) % 31 == 0;
    return Inflate(zlib_header ? Format::kZlib : Format::kRawDeflate, body, "deflate", max_bytes, account);
  }
  return absl::UnimplementedError(absl::StrCat(
      "Content-Encoding: '", e.substr(0, 64),
      "' is not served; send the body as it is, or encoded with gzip or deflate (one encoding, not a list)"));
}

}  // namespace infergate
