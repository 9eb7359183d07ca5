#include "service/http/content_encoding.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <vector>

namespace infergate {
namespace {

// `text` compressed by zlib with `window_bits` (31: gzip, 15: zlib, -15: raw).
std::string Compress(const std::string& text, int window_bits) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, window_bits, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, text.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

const std::string kBody = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[1,2]}]})";

TEST(ContentEncodingTest, InflatesGzipZlibAndRawDeflate) {
  for (const auto& [encoding, bits] : std::vector<std::pair<std::string, int>>{
           {"gzip", 31}, {"x-gzip", 31}, {"GZip", 31}, {"deflate", 15}, {"deflate", -15}}) {
    absl::StatusOr<std::string> body = DecodeContentEncoding(encoding, Compress(kBody, bits), 1 << 20);
    ASSERT_TRUE(body.ok()) << encoding << " " << bits << ": " << body.status();
    EXPECT_EQ(*body, kBody);
  }
}

TEST(ContentEncodingTest, IdentityAndNoHeaderLeaveTheBody) {
  for (const char* encoding : {"", "identity", " Identity "}) {
    EXPECT_FALSE(IsEncodedBody(encoding)) << encoding;
    absl::StatusOr<std::string> body = DecodeContentEncoding(encoding, kBody, 4);  // no limit applies
    ASSERT_TRUE(body.ok());
    EXPECT_EQ(*body, kBody);
  }
}

TEST(ContentEncodingTest, TheLimitHoldsExactly) {
  const std::string text(100000, 'a');
  const std::string packed = Compress(text, 31);
  ASSERT_TRUE(DecodeContentEncoding("gzip", packed, text.size()).ok());
  absl::StatusOr<std::string> over = DecodeContentEncoding("gzip", packed, text.size() - 1);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(over.status().message().find("inflates to more than"), absl::string_view::npos);
}

TEST(ContentEncodingTest, ABombIsStoppedAtTheLimitBeforeAnythingIsKept) {
  const std::string zeros(64 << 20, '\0');
  const std::string packed = Compress(zeros, 31);
  ASSERT_LT(packed.size(), 1u << 20);
  uint64_t accounted = 0;
  absl::StatusOr<std::string> body = DecodeContentEncoding("gzip", packed, 1 << 20, [&](uint64_t bytes) {
    accounted += bytes;
    return absl::OkStatus();
  });
  EXPECT_EQ(body.status().code(), absl::StatusCode::kOutOfRange);
  // Measured through one chunk and refused: nothing was asked for.
  EXPECT_EQ(accounted, 0u);
}

TEST(ContentEncodingTest, TheExactSizeIsAccountedOnceBeforeItIsAllocated) {
  const std::string text(3 << 20, 'q');
  const std::string packed = Compress(text, 31);
  std::vector<uint64_t> asked;
  absl::StatusOr<std::string> body = DecodeContentEncoding("gzip", packed, 8 << 20, [&](uint64_t bytes) {
    asked.push_back(bytes);
    return absl::OkStatus();
  });
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, text);
  EXPECT_EQ(asked, std::vector<uint64_t>{text.size()});
  // Allocated once at its size: no doubling capacity past it.
  EXPECT_LE(body->capacity(), text.size() + 16);
}

TEST(ContentEncodingTest, TheAccountantCanStopIt) {
  const std::string packed = Compress(std::string(1 << 20, 'b'), 31);
  int calls = 0;
  absl::StatusOr<std::string> body = DecodeContentEncoding("gzip", packed, 8 << 20, [&](uint64_t) {
    ++calls;
    return absl::ResourceExhaustedError("budget");
  });
  EXPECT_EQ(body.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(calls, 1);
}

TEST(ContentEncodingTest, BrokenDataIsRefusedNamingTheEncoding) {
  const std::string packed = Compress(kBody, 31);
  for (const std::string& broken : {kBody, packed.substr(0, packed.size() - 10), packed + "trailing", std::string()}) {
    absl::StatusOr<std::string> body = DecodeContentEncoding("gzip", broken, 1 << 20);
    ASSERT_EQ(body.status().code(), absl::StatusCode::kInvalidArgument) << body.status();
    EXPECT_NE(body.status().message().find("Content-Encoding: gzip"), absl::string_view::npos) << body.status();
  }
}

TEST(ContentEncodingTest, UnknownAndStackedEncodingsAreNotServed) {
  for (const char* encoding : {"br", "zstd", "compress", "gzip, deflate", "gzip, gzip"}) {
    absl::StatusOr<std::string> body = DecodeContentEncoding(encoding, kBody, 1 << 20);
    ASSERT_EQ(body.status().code(), absl::StatusCode::kUnimplemented) << encoding;
    EXPECT_NE(body.status().message().find(encoding), absl::string_view::npos) << body.status();
  }
}

}  // namespace
}  // namespace infergate
