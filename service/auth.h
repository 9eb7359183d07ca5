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

#include "common/mutex.h"
#include "absl/functional/function_ref.h"
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
                                             bool admin_disabled,
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
  bool admin_disabled_ = false;
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
