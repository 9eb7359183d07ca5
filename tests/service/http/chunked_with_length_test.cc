// Which heads that frame their body both ways are mended, as one table:
// only one Transfer-Encoding ending in chunked beside Content-Length.

#include "service/http/chunked_with_length.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace infergate {
namespace {

TEST(ChunkedWithLength, OnlyChunkedLastBesideALengthIsMended) {
  struct Row {
    const char* what;
    std::string fields;
    std::optional<std::string> mended;
  };
  const Row rows[] = {
      {"length after chunked: the length goes, the body's start stays",
       "Host: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello",
       "Host: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello"},
      {"length first, any case, two of them",
       "content-LENGTH: 5\r\nHost: x\r\nTRANSFER-ENCODING: Chunked\r\nContent-Length: 7\r\n\r\n",
       "Host: x\r\nTRANSFER-ENCODING: Chunked\r\n\r\n"},
      {"chunked last after another coding", "Transfer-Encoding: gzip, chunked\r\nContent-Length: 5\r\n\r\n",
       "Transfer-Encoding: gzip, chunked\r\n\r\n"},
      {"chunked not last: refused", "Transfer-Encoding: chunked, gzip\r\nContent-Length: 5\r\n\r\n", std::nullopt},
      {"a coding that is not chunked: refused", "Transfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\n", std::nullopt},
      {"two Transfer-Encodings: refused",
       "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", std::nullopt},
      {"no Content-Length: nothing to mend", "Transfer-Encoding: chunked\r\n\r\n", std::nullopt},
      {"no Transfer-Encoding: a bad length stays bad", "Content-Length: 5, 6\r\n\r\n", std::nullopt},
      {"the head not ended", "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", std::nullopt},
      {"a line that is not a field", "Transfer-Encoding: chunked\r\nnot a field\r\nContent-Length: 5\r\n\r\n",
       std::nullopt},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(DropLengthBesideChunked(row.fields), row.mended) << row.what;
  }
}

}  // namespace
}  // namespace infergate
