#pragma once
// Bearer-token authentication for the inference and admin RPCs. Tokens are
// compared in constant time; health checks never need one.
//
// Token files are watched: at most once per `reload_interval`, a Check
// looks at the files' identity (inode, size, mtime; a Kubernetes Secret
// update swaps a symlink) and re-reads those that changed. The file is the
// truth: a token removed from it stops working, and a file emptied or
// deleted revokes all of its tokens (that role then accepts none; it never
// opens up). A line too short to be a token is skipped with a warning that
// names its line, and the file's other tokens still count.
//
// Threading: copies share one token set; Check may be called from any
// thread at once.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"

namespace infergate {

class TokenAuth {
 public:
  enum class Role { kInference, kAdmin };

  // Who may call the admin RPCs (load and unload, with the files an upload
  // carries; TorchServe's unregister; log settings) when no admin token
  // file is given. A load can run native code (a .pt2 is a shared library),
  // so they are closed unless the operator says otherwise.
  enum class AdminAccess {
    kTokenOnly,  // the default: an admin token is needed; without a file, refused
    kOpen,       // --open-admin-api: anyone who reaches the port (a trusted network only)
    kDisabled,   // --disable-admin: refused, whatever tokens there are
  };

  // Reads one token per line (blank lines and '#' comments skipped) from
  // each file. No inference file: inference is open. The admin RPCs need an
  // admin token, or are open to anyone when `admin` is kOpen and no admin
  // file is given; kDisabled refuses them outright.
  static absl::StatusOr<TokenAuth> FromFiles(const std::string& inference_file, const std::string& admin_file,
                                             AdminAccess admin,
                                             std::chrono::milliseconds reload_interval = std::chrono::seconds(1));
  TokenAuth() = default;

  // `authorization` is the request's "authorization" metadata ("" if none).
  // UNAUTHENTICATED without a valid token; PERMISSION_DENIED for a valid
  // token of the wrong role or for admin RPCs that are disabled.
  absl::Status Check(absl::string_view authorization, Role role) const;
  // The same, reading the header only when the role needs a token: a gRPC
  // call's metadata map is built on first look, which an open server
  // never needs.
  absl::Status Check(absl::FunctionRef<absl::string_view()> authorization, Role role) const;

  // Whether any token is required anywhere (reflection is hidden then).
  bool enabled() const;
  // Whether the admin RPCs run for callers without a token (kOpen and no
  // admin token file): the REST API then checks that each such request was
  // sent to one of the server's own names (DNS rebinding).
  bool admin_open_to_anyone() const;
  // The names besides localhost, IP addresses and the machine's own name
  // (gethostname) that CheckAdminHost accepts. Call before sharing.
  void SetHostNames(std::vector<std::string> names) { host_names_ = std::move(names); }
  // For a REST admin request while admin_open_to_anyone(): OK when `host`
  // (its Host header, port and all) names this server, else
  // PERMISSION_DENIED. A page that rebinds its own DNS name to this
  // server's address sends its own name as Host; a token would stop it, but
  // an open admin API has none. OK whenever an admin token is required.
  absl::Status CheckAdminHost(absl::string_view host) const;
  // The same for a REST inference request, on a server whose REST port
  // listens on loopback only (`SetLoopbackOnly`) and whose inference needs
  // no token: a page that rebinds its name to 127.0.0.1 reaches nothing
  // else there. A server reachable beyond loopback without a token answers
  // anyone who reaches it anyway, whatever name it is sent to (services
  // reach it by names no list holds): SECURITY.md.
  absl::Status CheckInferenceHost(absl::string_view host) const;
  void SetLoopbackOnly(bool loopback_only) { loopback_only_ = loopback_only; }

  // What anyone may do without a token, for the start-up warning: "" when
  // nothing, else e.g. "inference" or "inference and model management".
  std::string OpenToAnyone() const;

 private:
  struct Tokens {
    std::vector<std::string> inference;
    std::vector<std::string> admin;
    // A role whose token file was given needs a token even when the file
    // now holds none (emptied or deleted: every token revoked).
    bool inference_guarded = false;
    bool admin_guarded = false;
  };
  // One watched token file: where, and what it was when last read.
  struct WatchedFile {
    std::string path;
    std::string flag;      // for messages: "--auth-token-file"
    std::string identity;  // inode, size and mtime when last read; "" if unset
  };
  struct Shared {
    Mutex mu;
    std::shared_ptr<const Tokens> tokens ABSL_GUARDED_BY(mu) = std::make_shared<Tokens>();
    WatchedFile inference_file ABSL_GUARDED_BY(mu);
    WatchedFile admin_file ABSL_GUARDED_BY(mu);
    std::chrono::milliseconds reload_interval{1000};
    bool watches_files = false;  // a token file was given (set before use, then read only)
    std::atomic<int64_t> next_check_ns{0};
  };
  std::shared_ptr<const Tokens> Current() const;
  // Re-reads changed token files when the interval has passed.
  void MaybeReload() const;

  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  AdminAccess admin_ = AdminAccess::kTokenOnly;
  std::vector<std::string> host_names_;
  bool loopback_only_ = false;
  // Whether `host` (a Host header) names this server.
  bool OwnHostName(absl::string_view host) const;
};

// Constant-time equality: the time taken does not depend on where the
// strings differ (only on their lengths).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// One token per line; blank lines and '#' comments skipped. A line shorter
// than 16 characters is skipped too, and its number listed in `skipped`.
// An error only when the file cannot be read.
struct TokenFile {
  std::vector<std::string> tokens;
  std::vector<int> skipped;  // 1-based line numbers
};
absl::StatusOr<TokenFile> ReadTokenFile(const std::string& path);

}  // namespace infergate
