#pragma once
// UTF-8 validity, for strings that must be text: a TorchScript str, a JSON
// string.

#include <cstddef>
#include <optional>

#include "absl/strings/string_view.h"

namespace infergate {

// The offset of the first byte of `s` that does not start or continue a
// valid UTF-8 sequence (overlong forms, surrogates and code points past
// U+10FFFF are invalid); nullopt when all of `s` is valid.
std::optional<size_t> FirstInvalidUtf8(absl::string_view s);

}  // namespace infergate
