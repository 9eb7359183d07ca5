#pragma once
// Reads a multipart/form-data body (RFC 7578), as TorchServe's clients
// send files to /predictions (curl -F data=@kitten.jpg): the content of
// one field. Pure function; thread-safe; the result aliases the body.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

// Whether `content_type` is multipart/form-data.
bool IsMultipartForm(absl::string_view content_type);

// The content of the field named "data", else "body", else the first
// field. INVALID_ARGUMENT for a missing boundary or a body that does not
// follow it.
absl::StatusOr<absl::string_view> MultipartFormField(absl::string_view content_type, absl::string_view body);

}  // namespace infergate
