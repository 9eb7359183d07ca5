#pragma once
// Model files sent with an explicit load (Triton's `file:<path>` load
// parameters), written into a fresh private folder and served from there
// instead of the repository's folder until the next explicit load.
//
// Safety: files that would run native code (CheckNotNativeCode) are
// refused unless the operator allows them (--allow-native-uploads); a path is relative, made of plain names (no "..",
// ".", empty or hidden-separator parts, no backslash or NUL), at most kMaxUploadDepth deep; files are created new
// (O_EXCL, O_NOFOLLOW) under a folder no one else writes (mode 0700, made with mkdtemp), so nothing lands outside it.
//
// Threading: UploadFolders is thread-safe; the functions are pure.

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"

namespace infergate {

inline constexpr size_t kMaxUploadFiles = 64;
inline constexpr int kMaxUploadDepth = 4;

// INVALID_ARGUMENT saying why `path` may not name a file in a model folder.
absl::Status CheckUploadPath(absl::string_view path);

// PERMISSION_DENIED naming `path` when the file would make the server run
// native code: a shared library (by name: .so, .so.N, .dylib, .dll; or by
// its first bytes: ELF, Mach-O, PE), an AOTInductor package (.pt2, whose
// compiled model is a shared library), or a zip archive holding any of
// these (a .pt2 under another name). A zip that cannot be read through is
// refused too: what cannot be checked is not let in.
absl::Status CheckNotNativeCode(absl::string_view path, absl::string_view content);

// Whether `path` is a version's model file ("<version>/model.pt", or
// "<version>/model.pt2", an AOTInductor package: native code, which
// CheckNotNativeCode refuses unless native uploads are allowed).
bool IsVersionModelFile(absl::string_view path);

// Makes and removes the folders uploads are served from: one private root
// per process (under the system's temporary folder), one fresh folder per
// upload inside it. The root and everything in it go with this object.
class UploadFolders {
 public:
  UploadFolders() = default;
  ~UploadFolders();
  UploadFolders(const UploadFolders&) = delete;
  UploadFolders& operator=(const UploadFolders&) = delete;

  // Writes `files` as model `model`'s folder and returns that folder
  // (".../<upload>/<model>"); on failure nothing stays.
  absl::StatusOr<std::string> Write(const std::string& model, const std::map<std::string, std::string>& files);
  // Removes a model folder Write returned (and its upload folder).
  void Remove(const std::string& model_dir);

 private:
  absl::StatusOr<std::string> Root() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Mutex mu_;
  std::string root_ ABSL_GUARDED_BY(mu_);  // made on first use
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace infergate
