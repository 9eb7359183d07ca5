#include "service/call/auth.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status_macros.h"

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

absl::StatusOr<TokenFile> ReadTokenFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, "token file"));
  TokenFile file;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    if (line.size() < 16) {
      file.skipped.push_back(number);
      continue;
    }
    file.tokens.emplace_back(line);
  }
  return file;
}

namespace {

// What identifies a file's content without reading it; "" when it cannot be
// stat'ed. stat() follows symlinks, so a swapped Secret symlink shows.
std::string FileIdentity(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  return absl::StrCat(st.st_dev, ":", st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
}

// "line 3" or "lines 3, 7": the lines of a token file that were skipped
// (never their content, which may be a token's beginning).
std::string SkippedLines(const std::vector<int>& lines) {
  return absl::StrCat(lines.size() == 1 ? "line " : "lines ", absl::StrJoin(lines, ", "),
                      " shorter than 16 characters (a token is at least 16) skipped");
}

// The token after an "authorization" header's scheme, which is matched
// without regard to case (RFC 7235); false when the scheme is not Bearer.
bool BearerToken(absl::string_view authorization, absl::string_view* token) {
  constexpr absl::string_view kScheme = "bearer ";
  if (authorization.size() < kScheme.size() ||
      !absl::EqualsIgnoreCase(authorization.substr(0, kScheme.size()), kScheme)) {
    return false;
  }
  *token = authorization.substr(kScheme.size());
  return true;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::StatusOr<TokenAuth> TokenAuth::FromFiles(const std::string& inference_file, const std::string& admin_file,
                                               AdminAccess admin, std::chrono::milliseconds reload_interval) {
  TokenAuth auth;
  auth.admin_ = admin;
  auto tokens = std::make_shared<Tokens>();
  Shared& shared = *auth.shared_;
  shared.reload_interval = reload_interval;
  shared.watches_files = !inference_file.empty() || !admin_file.empty();
  // Nobody else sees `shared` yet; the lock is for the rule, not a race.
  MutexLock lock(shared.mu);
  shared.inference_file = {inference_file, "--auth-token-file", ""};
  shared.admin_file = {admin_file, "--admin-token-file", ""};
  for (WatchedFile* file : {&shared.inference_file, &shared.admin_file}) {
    if (file->path.empty()) continue;
    file->identity = FileIdentity(file->path);
    absl::StatusOr<TokenFile> t = ReadTokenFile(file->path);
    if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(file->flag, ": ", t.status().message()));
    // At start-up a file without a token is a mistake to stop on, not a lock.
    if (t->tokens.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file->flag, ": token file ", file->path, " holds no token",
                       t->skipped.empty() ? "" : absl::StrCat(" (", SkippedLines(t->skipped), ")")));
    }
    if (!t->skipped.empty()) LOG_WARNING << file->flag << " " << file->path << ": " << SkippedLines(t->skipped);
    const bool inference = file == &shared.inference_file;
    (inference ? tokens->inference : tokens->admin) = std::move(t->tokens);
    (inference ? tokens->inference_guarded : tokens->admin_guarded) = true;
  }
  shared.tokens = std::move(tokens);
  shared.next_check_ns = NowNs() + std::chrono::nanoseconds(reload_interval).count();
  return auth;
}

std::shared_ptr<const TokenAuth::Tokens> TokenAuth::Current() const {
  MaybeReload();
  MutexLock lock(shared_->mu);
  return shared_->tokens;
}

void TokenAuth::MaybeReload() const {
  Shared& shared = *shared_;
  if (!shared.watches_files) return;
  int64_t now = NowNs();
  int64_t due = shared.next_check_ns.load(std::memory_order_relaxed);
  // One caller per interval does the checking; the others go on.
  if (now < due || !shared.next_check_ns.compare_exchange_strong(
                       due, now + std::chrono::nanoseconds(shared.reload_interval).count())) {
    return;
  }
  MutexLock lock(shared.mu);
  std::shared_ptr<Tokens> next;
  for (WatchedFile* file : {&shared.inference_file, &shared.admin_file}) {
    if (file->path.empty()) continue;
    std::string identity = FileIdentity(file->path);
    if (identity == file->identity) continue;
    file->identity = identity;
    // The file is the truth: what it no longer holds is revoked, all of it
    // when it is gone or empty.
    absl::StatusOr<TokenFile> t = ReadTokenFile(file->path);
    std::vector<std::string> tokens;
    if (!t.ok()) {
      LOG_WARNING << file->flag << " " << file->path << " cannot be read (" << t.status().message()
                  << "): every token it held is revoked until it is back";
    } else {
      if (!t->skipped.empty()) LOG_WARNING << file->flag << " " << file->path << ": " << SkippedLines(t->skipped);
      if (t->tokens.empty()) {
        LOG_WARNING << file->flag << " " << file->path << " holds no token: every token it held is revoked";
      }
      tokens = std::move(t->tokens);
    }
    if (!next) next = std::make_shared<Tokens>(*shared.tokens);
    (file == &shared.inference_file ? next->inference : next->admin) = std::move(tokens);
    LOG_INFO << file->flag << " " << file->path
             << " re-read: " << (file == &shared.inference_file ? next->inference.size() : next->admin.size())
             << " token(s)";
  }
  if (next) shared.tokens = std::move(next);
}

bool TokenAuth::enabled() const {
  std::shared_ptr<const Tokens> tokens = Current();
  return tokens->inference_guarded || tokens->admin_guarded || admin_ == AdminAccess::kDisabled;
}

bool TokenAuth::admin_open_to_anyone() const { return admin_ == AdminAccess::kOpen && !Current()->admin_guarded; }

bool TokenAuth::OwnHostName(absl::string_view host) const {
  absl::string_view name = host;
  if (absl::StartsWith(name, "[")) return true;  // an IPv6 address
  if (const size_t colon = name.rfind(':'); colon != absl::string_view::npos) name = name.substr(0, colon);
  std::string lower = absl::AsciiStrToLower(name);
  if (absl::EndsWith(lower, ".")) lower.pop_back();
  in_addr v4;
  if (!lower.empty() && inet_pton(AF_INET, lower.c_str(), &v4) == 1) return true;
  if (lower == "localhost" || absl::EndsWith(lower, ".localhost")) return true;
  char own[256] = {};
  if (gethostname(own, sizeof(own) - 1) == 0 && own[0] != '\0') {
    const std::string machine = absl::AsciiStrToLower(own);
    if (lower == machine || lower == machine.substr(0, machine.find('.'))) return true;
  }
  for (const std::string& n : host_names_) {
    if (absl::EqualsIgnoreCase(lower, n)) return true;
  }
  return false;
}

absl::Status TokenAuth::CheckAdminHost(absl::string_view host) const {
  if (!admin_open_to_anyone() || OwnHostName(host)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "Host: '", host.substr(0, 64),
      "' is not a name of this server; while the admin API is open without a token (--open-admin-api), admin "
      "requests must be sent to localhost, an IP address, the machine's name or an --http-host-name (a web page "
      "that rebinds its own name to this server sends its own)"));
}

absl::Status TokenAuth::CheckInferenceHost(absl::string_view host) const {
  if (!loopback_only_ || host.empty() || Current()->inference_guarded || OwnHostName(host)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "Host: '", host.substr(0, 64),
      "' is not a name of this server; a server on loopback without an inference token (--auth-token-file) "
      "answers requests sent to localhost, an IP address, the machine's name or an --http-host-name only (a web "
      "page that rebinds its own name to this server sends its own)"));
}

std::string TokenAuth::OpenToAnyone() const {
  std::shared_ptr<const Tokens> tokens = Current();
  const bool inference_open = !tokens->inference_guarded;
  const bool admin_open = admin_ == AdminAccess::kOpen && !tokens->admin_guarded;
  if (inference_open && admin_open) return "inference and model management (load, unload, uploads)";
  if (inference_open) return "inference";
  if (admin_open) return "model management (load, unload, uploads)";
  return "";
}

absl::Status TokenAuth::Check(absl::string_view authorization, Role role) const {
  return Check([authorization] { return authorization; }, role);
}

absl::Status TokenAuth::Check(absl::FunctionRef<absl::string_view()> read_authorization, Role role) const {
  if (role == Role::kAdmin && admin_ == AdminAccess::kDisabled) {
    return absl::PermissionDeniedError("admin RPCs (load, unload) are disabled on this server (--disable-admin)");
  }
  std::shared_ptr<const Tokens> tokens = Current();
  const std::vector<std::string>& admin = tokens->admin;
  const std::vector<std::string>& inference = tokens->inference;
  const std::vector<std::string>& wanted = role == Role::kAdmin ? admin : inference;
  const bool guarded = role == Role::kAdmin ? tokens->admin_guarded : tokens->inference_guarded;
  if (role == Role::kAdmin && !tokens->admin_guarded && admin_ != AdminAccess::kOpen) {
    // Closed by default: a load can run native code, so model management is
    // open to anyone only when the operator says so.
    return absl::PermissionDeniedError(
        "admin RPCs (load, unload) need an admin token and this server has none: give it --admin-token-file, "
        "or --open-admin-api where everyone who can reach the port may load code into the server");
  }
  if (!guarded) return absl::OkStatus();
  const absl::string_view authorization = read_authorization();
  absl::string_view token;
  if (!BearerToken(authorization, &token)) {
    return absl::UnauthenticatedError("authorization: a \"Bearer <token>\" header is required");
  }
  // Admin tokens may also run inference.
  if (role == Role::kInference) {
    bool is_admin = false;
    for (const std::string& a : admin) is_admin |= ConstantTimeEquals(token, a);
    if (is_admin) return absl::OkStatus();
  }
  if (wanted.empty()) {
    return absl::UnauthenticatedError(absl::StrCat("authorization: no token is valid now (",
                                                   role == Role::kAdmin ? "--admin-token-file" : "--auth-token-file",
                                                   " holds none)"));
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
