#include "service/auth.h"


#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "absl/strings/str_split.h"

namespace infergate {

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path, "token file");
  if (!text.ok()) return text.status();
  std::vector<std::string> tokens;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    if (line.size() < 16) {
      return absl::InvalidArgumentError(absl::StrCat("token file ", path, ": tokens must be at least 16 characters"));
    }
    tokens.emplace_back(line);
  }
  if (tokens.empty()) return absl::InvalidArgumentError(absl::StrCat("token file ", path, " holds no token"));
  return tokens;
}

absl::StatusOr<TokenAuth> TokenAuth::FromFiles(const std::string& inference_file, const std::string& admin_file,
                                               bool admin_disabled) {
  TokenAuth auth;
  auth.admin_disabled_ = admin_disabled;
  if (!inference_file.empty()) {
    absl::StatusOr<std::vector<std::string>> t = ReadTokenFile(inference_file);
    if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat("--auth-token-file: ", t.status().message()));
    auth.inference_ = *std::move(t);
  }
  if (!admin_file.empty()) {
    absl::StatusOr<std::vector<std::string>> t = ReadTokenFile(admin_file);
    if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat("--admin-token-file: ", t.status().message()));
    auth.admin_ = *std::move(t);
  }
  return auth;
}

absl::Status TokenAuth::Check(absl::string_view authorization, Role role) const {
  if (role == Role::kAdmin && admin_disabled_) {
    return absl::PermissionDeniedError("admin RPCs (LoadModel, UnloadModel) are disabled on this server");
  }
  const std::vector<std::string>& wanted = role == Role::kAdmin ? admin_ : inference_;
  if (role == Role::kAdmin && admin_.empty() && !inference_.empty()) {
    // Closed by default: a server that guards inference never leaves model
    // management open to anyone.
    return absl::PermissionDeniedError(
        "admin RPCs (load, unload) need an admin token and this server has none (--admin-token-file)");
  }
  if (wanted.empty()) return absl::OkStatus();
  // Admin tokens may also run inference.
  if (role == Role::kInference) {
    absl::string_view t = authorization;
    if (absl::ConsumePrefix(&t, "Bearer ") || absl::ConsumePrefix(&t, "bearer ")) {
      bool admin = false;
      for (const std::string& a : admin_) admin |= ConstantTimeEquals(t, a);
      if (admin) return absl::OkStatus();
    }
  }
  absl::string_view token = authorization;
  if (!absl::ConsumePrefix(&token, "Bearer ") && !absl::ConsumePrefix(&token, "bearer ")) {
    return absl::UnauthenticatedError("authorization: a \"Bearer <token>\" header is required");
  }
  bool match = false;
  for (const std::string& t : wanted) match |= ConstantTimeEquals(token, t);
  if (match) return absl::OkStatus();
  // A valid token of the other role: authenticated, but not allowed here.
  bool other_match = false;
  if (role == Role::kAdmin) {
    for (const std::string& t : inference_) other_match |= ConstantTimeEquals(token, t);
  }
  if (other_match) return absl::PermissionDeniedError("authorization: this token may not manage models");
  return absl::UnauthenticatedError("authorization: token not recognised");
}

}  // namespace infergate
