#include "service/auth.h"

#include <sys/stat.h>

#include <algorithm>

#include "common/logging.h"

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

namespace {

// What identifies a file's content without reading it; "" when it cannot be
// stat'ed. stat() follows symlinks, so a swapped Secret symlink shows.
std::string FileIdentity(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  return absl::StrCat(st.st_dev, ":", st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::StatusOr<TokenAuth> TokenAuth::FromFiles(const std::string& inference_file, const std::string& admin_file,
                                               bool admin_disabled, std::chrono::milliseconds reload_interval) {
  TokenAuth auth;
  auth.admin_disabled_ = admin_disabled;
  auto tokens = std::make_shared<Tokens>();
  Shared& shared = *auth.shared_;
  shared.reload_interval = reload_interval;
  shared.inference_file = {inference_file, "--auth-token-file", ""};
  shared.admin_file = {admin_file, "--admin-token-file", ""};
  for (WatchedFile* file : {&shared.inference_file, &shared.admin_file}) {
    if (file->path.empty()) continue;
    file->identity = FileIdentity(file->path);
    absl::StatusOr<std::vector<std::string>> t = ReadTokenFile(file->path);
    if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(file->flag, ": ", t.status().message()));
    (file == &shared.inference_file ? tokens->inference : tokens->admin) = *std::move(t);
  }
  shared.tokens = std::move(tokens);
  shared.next_check_ns = NowNs() + std::chrono::nanoseconds(reload_interval).count();
  return auth;
}

std::shared_ptr<const TokenAuth::Tokens> TokenAuth::Current() const {
  MaybeReload();
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->tokens;
}

void TokenAuth::MaybeReload() const {
  Shared& shared = *shared_;
  if (shared.inference_file.path.empty() && shared.admin_file.path.empty()) return;
  int64_t now = NowNs();
  int64_t due = shared.next_check_ns.load(std::memory_order_relaxed);
  // One caller per interval does the checking; the others go on.
  if (now < due || !shared.next_check_ns.compare_exchange_strong(
                       due, now + std::chrono::nanoseconds(shared.reload_interval).count())) {
    return;
  }
  std::lock_guard<std::mutex> lock(shared.mu);
  std::shared_ptr<Tokens> next;
  for (WatchedFile* file : {&shared.inference_file, &shared.admin_file}) {
    if (file->path.empty()) continue;
    std::string identity = FileIdentity(file->path);
    if (identity == file->identity) continue;
    file->identity = identity;
    absl::StatusOr<std::vector<std::string>> t = ReadTokenFile(file->path);
    if (!t.ok()) {
      LOG_WARNING << file->flag << " changed but cannot be used (" << t.status().message()
                  << "); keeping the tokens read before";
      continue;
    }
    if (!next) next = std::make_shared<Tokens>(*shared.tokens);
    (file == &shared.inference_file ? next->inference : next->admin) = *std::move(t);
    LOG_INFO << file->flag << " " << file->path << " re-read: " << (file == &shared.inference_file ? next->inference.size() : next->admin.size())
             << " token(s)";
  }
  if (next) shared.tokens = std::move(next);
}

bool TokenAuth::enabled() const {
  std::shared_ptr<const Tokens> tokens = Current();
  return !tokens->inference.empty() || !tokens->admin.empty() || admin_disabled_;
}

absl::Status TokenAuth::Check(absl::string_view authorization, Role role) const {
  return Check([authorization] { return authorization; }, role);
}

absl::Status TokenAuth::Check(absl::FunctionRef<absl::string_view()> read_authorization, Role role) const {
  if (role == Role::kAdmin && admin_disabled_) {
    return absl::PermissionDeniedError("admin RPCs (LoadModel, UnloadModel) are disabled on this server");
  }
  std::shared_ptr<const Tokens> tokens = Current();
  const std::vector<std::string>& admin = tokens->admin;
  const std::vector<std::string>& inference = tokens->inference;
  const std::vector<std::string>& wanted = role == Role::kAdmin ? admin : inference;
  if (role == Role::kAdmin && admin.empty() && !inference.empty()) {
    // Closed by default: a server that guards inference never leaves model
    // management open to anyone.
    return absl::PermissionDeniedError(
        "admin RPCs (load, unload) need an admin token and this server has none (--admin-token-file)");
  }
  if (wanted.empty()) return absl::OkStatus();
  const absl::string_view authorization = read_authorization();
  // Admin tokens may also run inference.
  if (role == Role::kInference) {
    absl::string_view t = authorization;
    if (absl::ConsumePrefix(&t, "Bearer ") || absl::ConsumePrefix(&t, "bearer ")) {
      bool is_admin = false;
      for (const std::string& a : admin) is_admin |= ConstantTimeEquals(t, a);
      if (is_admin) return absl::OkStatus();
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
    for (const std::string& t : inference) other_match |= ConstantTimeEquals(token, t);
  }
  if (other_match) return absl::PermissionDeniedError("authorization: this token may not manage models");
  return absl::UnauthenticatedError("authorization: token not recognised");
}

}  // namespace infergate
