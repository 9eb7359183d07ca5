#pragma once
// Protobuf text format (what a config.pbtxt holds) read without its schema
// into a JSON tree, so a configuration written for another server's schema
// (Triton's) can be read field by field and each field it has that
// infergate does not serve refused by name.
//
//   name: "m"                  {"name": "m"}
//   dims: [3, 224]             {"dims": [3, 224]}
//   input { name: "a" }        {"input": {"name": "a"}}
//   input [ {..}, {..} ]       {"input": [{..}, {..}]}
//   kind: KIND_GPU             {"kind": "KIND_GPU"}   (enum values as strings)
//   a field repeated           its values gathered in an array
//
// Without the schema a field written once is not known to be a list; the
// reader of the tree takes a single value where it expects a list. Numbers
// keep their text's type (integer or floating); `true`/`false`
// are booleans; `#` starts a comment; `<...>` may stand for `{...}`; `,`
// and `;` between fields are allowed. Nesting is bounded (kMaxDepth).
//
// Threading: a pure function.

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

inline constexpr int kTextProtoMaxDepth = 32;

// INVALID_ARGUMENT with the line of the first error.
absl::StatusOr<nlohmann::json> TextProtoToJson(absl::string_view text);

}  // namespace infergate
