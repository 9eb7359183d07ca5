#include "common/utf8.h"

#include <cstdint>

namespace infergate {

std::optional<size_t> FirstInvalidUtf8(absl::string_view s) {
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = u[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    uint32_t lowest = 0;
    uint32_t code = 0;
    if ((c & 0xe0) == 0xc0) {
      length = 2, lowest = 0x80, code = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      length = 3, lowest = 0x800, code = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      length = 4, lowest = 0x10000, code = c & 0x07;
    } else {
      return i;
    }
    if (n - i < length) return i;
    for (size_t k = 1; k < length; ++k) {
      if ((u[i + k] & 0xc0) != 0x80) return i;
      code = code << 6 | (u[i + k] & 0x3f);
    }
    if (code < lowest || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return i;
    i += length;
  }
  return std::nullopt;
}

}  // namespace infergate
