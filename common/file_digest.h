#pragma once
// Content digests of files, for facts learned about a file that must follow
// its bytes rather than its name or timestamps (a copied model keeps them,
// a rewritten one loses them).

#include <string>

#include "absl/status/statusor.h"

namespace infergate {

// The SHA-256 of the file at `path`, as 64 lower-case hex digits. Reads in
// blocks: memory stays small for any size. NOT_FOUND / PERMISSION_DENIED /
// INTERNAL name `what` and the path.
absl::StatusOr<std::string> Sha256OfFile(const std::string& path, const std::string& what);

}  // namespace infergate
