#pragma once
// Reads a Java .properties file (TorchServe's config.properties): one
// `key=value`, `key: value` or `key value` per logical line, `#` and `!`
// comments, a trailing backslash continuing the line (leading blanks of
// the next line dropped), and the escapes \t \n \r \f \uXXXX and \<char>.
// Pure function; thread-safe.

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

// The keys and values of `text`, a later key replacing an earlier one.
// INVALID_ARGUMENT naming the line for a malformed \u escape.
absl::StatusOr<std::map<std::string, std::string>> ParseJavaProperties(absl::string_view text);

}  // namespace infergate
