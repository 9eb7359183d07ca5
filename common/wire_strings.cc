#include "common/wire_strings.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

constexpr size_t kPrefixBytes = 4;

uint32_t LittleEndian32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(u[0]) | static_cast<uint32_t>(u[1]) << 8 | static_cast<uint32_t>(u[2]) << 16 |
         static_cast<uint32_t>(u[3]) << 24;
}

}  // namespace

absl::StatusOr<std::vector<absl::string_view>> ParseSerializedStrings(absl::string_view bytes, int64_t elements,
                                                                      absl::string_view data_field) {
  if (elements < 0 || static_cast<uint64_t>(elements) > bytes.size() / kPrefixBytes) {
    return absl::InvalidArgumentError(absl::StrCat(data_field, ": holds ", bytes.size(), " bytes, too few for ",
                                                   elements, " BYTES elements (each needs a 4-byte length)"));
  }
  std::vector<absl::string_view> out;
  out.reserve(static_cast<size_t>(elements));
  size_t at = 0;
  for (int64_t i = 0; i < elements; ++i) {
    if (bytes.size() - at < kPrefixBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          data_field, ": BYTES element ", i, ": its 4-byte length is cut off (", bytes.size() - at, " bytes left)"));
    }
    const uint32_t length = LittleEndian32(bytes.data() + at);
    at += kPrefixBytes;
    if (length > bytes.size() - at) {
      return absl::InvalidArgumentError(absl::StrCat(data_field, ": BYTES element ", i, " claims ", length,
                                                     " bytes but ", bytes.size() - at, " remain"));
    }
    out.push_back(bytes.substr(at, length));
    at += length;
  }
  if (at != bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        data_field, ": ", bytes.size() - at, " bytes follow the last of the shape's ", elements, " BYTES elements"));
  }
  return out;
}

void AppendSerializedString(absl::string_view s, std::string* out) {
  const auto n = static_cast<uint32_t>(s.size());
  const char prefix[kPrefixBytes] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                                     static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
  out->append(prefix, kPrefixBytes);
  out->append(s.data(), s.size());
}

uint64_t SerializedSize(const std::vector<absl::string_view>& strings) {
  uint64_t n = 0;
  for (absl::string_view s : strings) n += kPrefixBytes + s.size();
  return n;
}

}  // namespace infergate
