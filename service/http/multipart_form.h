#pragma once
// Reads a multipart/form-data body (RFC 7578), as TorchServe's clients
// send files to /predictions (curl -F data=@kitten.jpg): the content of
// one field. Pure function; thread-safe; the result aliases the body.

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

// Whether `content_type` is multipart/form-data.
bool IsMultipartForm(absl::string_view content_type);

// The most parts MultipartFormField reads.
inline constexpr size_t kMaxMultipartParts = 1000;

// The content of the field named "data" (reading stops there), else
// "body", else the first field. INVALID_ARGUMENT for a missing boundary, a
// body that does not follow it, or more than kMaxMultipartParts parts.
absl::StatusOr<absl::string_view> MultipartFormField(absl::string_view content_type, absl::string_view body);

}  // namespace infergate
