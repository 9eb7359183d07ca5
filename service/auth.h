#pragma once
// Bearer-token authentication for the inference and admin RPCs. Tokens are
// compared in constant time; health checks never need one.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

class TokenAuth {
 public:
  enum class Role { kInference, kAdmin };

  // Reads one token per line (blank lines and '#' comments skipped) from
  // each file. No files: everything is open. Inference tokens without admin
  // tokens: the admin RPCs are refused (closed by default). With
  // `admin_disabled`, LoadModel/UnloadModel are refused outright.
  static absl::StatusOr<TokenAuth> FromFiles(const std::string& inference_file, const std::string& admin_file,
                                             bool admin_disabled);
  TokenAuth() = default;

  // `authorization` is the request's "authorization" metadata ("" if none).
  // UNAUTHENTICATED without a valid token; PERMISSION_DENIED for a valid
  // token of the wrong role or for admin RPCs that are disabled.
  absl::Status Check(absl::string_view authorization, Role role) const;

  bool enabled() const { return !inference_.empty() || !admin_.empty() || admin_disabled_; }

 private:
  std::vector<std::string> inference_;
  std::vector<std::string> admin_;
  bool admin_disabled_ = false;
};

// Constant-time equality: the time taken does not depend on where the
// strings differ (only on their lengths).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path);

}  // namespace infergate
