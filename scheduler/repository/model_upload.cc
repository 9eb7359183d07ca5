#include "scheduler/repository/model_upload.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/owned_temp_folder.h"
#include "common/status_macros.h"
#include "common/zip_listing.h"
#include "scheduler/repository/model_name.h"
#include "scheduler/repository/model_repository.h"

namespace infergate {
namespace fs = std::filesystem;

absl::Status CheckUploadPath(absl::string_view path) {
  if (path.empty()) return absl::InvalidArgumentError("the file has no path");
  if (path.find('\0') != absl::string_view::npos || path.find('\\') != absl::string_view::npos) {
    return absl::InvalidArgumentError("a path holds no NUL or backslash");
  }
  if (path.front() == '/') return absl::InvalidArgumentError("the path must be relative to the model's folder");
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  if (static_cast<int>(parts.size()) > kMaxUploadDepth) {
    return absl::InvalidArgumentError(absl::StrCat("the path is more than ", kMaxUploadDepth, " folders deep"));
  }
  for (absl::string_view part : parts) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("'", part, "' is not a file or folder name; a path stays inside the model's folder"));
    }
    if (part.size() > 255) return absl::InvalidArgumentError("a name in the path is longer than 255 bytes");
  }
  return absl::OkStatus();
}

namespace {

// Whether a file named `name` is native code or a package of it.
bool NativeByName(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  absl::string_view base = lower;
  if (const size_t slash = base.rfind('/'); slash != absl::string_view::npos) base = base.substr(slash + 1);
  for (absl::string_view suffix : {".so", ".dylib", ".dll", ".pt2", ".bundle"}) {
    if (absl::EndsWith(base, suffix)) return true;
  }
  return absl::StrContains(base, ".so.");  // libfoo.so.1
}

// Whether `content` starts like an executable or shared library.
bool NativeByMagic(absl::string_view content) {
  if (absl::StartsWith(content,
                       "\x7f"
                       "ELF"))
    return true;
  for (absl::string_view magic : {absl::string_view("\xfe\xed\xfa\xce", 4), absl::string_view("\xfe\xed\xfa\xcf", 4),
                                  absl::string_view("\xce\xfa\xed\xfe", 4), absl::string_view("\xcf\xfa\xed\xfe", 4),
                                  absl::string_view("\xca\xfe\xba\xbe", 4)}) {
    if (absl::StartsWith(content, magic)) return true;
  }
  // PE: "MZ", and at the offset its header gives, "PE\0\0".
  if (absl::StartsWith(content, "MZ") && content.size() >= 0x40) {
    uint32_t pe = 0;
    for (int i = 3; i >= 0; --i) pe = (pe << 8) | static_cast<unsigned char>(content[0x3c + i]);
    if (pe <= content.size() - 4 && content.substr(pe, 4) == absl::string_view("PE\0\0", 4)) return true;
  }
  return false;
}

}  // namespace

absl::Status CheckNotNativeCode(absl::string_view path, absl::string_view content) {
  auto refused = [path](absl::string_view why) {
    return absl::PermissionDeniedError(
        absl::StrCat("file:", path.substr(0, 128), ": ", why,
                     "; this server takes no native code in uploads (--allow-native-uploads lets an admin send it)"));
  };
  if (NativeByName(path)) return refused("a shared library or AOTInductor package (.pt2) is native code");
  if (NativeByMagic(content)) return refused("the file is an executable or shared library");
  if (absl::StartsWith(content, "PK")) {
    absl::StatusOr<std::vector<ZipEntry>> entries = ListZipBytes(content, std::string(path.substr(0, 128)));
    if (!entries.ok())
      return refused(absl::StrCat("a zip archive that cannot be checked (", entries.status().message(), ")"));
    for (const ZipEntry& e : *entries) {
      if (NativeByName(e.name)) {
        return refused(absl::StrCat("the archive holds '", e.name.substr(0, 128), "', a shared library"));
      }
    }
  }
  return absl::OkStatus();
}

bool IsVersionModelFile(absl::string_view path) {
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  return parts.size() == 2 && (parts[1] == "model.pt" || parts[1] == "model.pt2") &&
         ParseVersion(parts[0], "version").ok() && std::to_string(*ParseVersion(parts[0], "version")) == parts[0];
}

UploadFolders::~UploadFolders() {
  if (root_.empty()) return;
  std::error_code ec;
  fs::remove_all(root_, ec);
}

absl::StatusOr<std::string> UploadFolders::Root() {
  if (!root_.empty()) return root_;
  // Named after this process, so that a later one removes it should this
  // one die without doing so.
  absl::StatusOr<std::string> made = MakeOwnedTempFolder("infergate-uploads-");
  if (!made.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot make a folder for uploaded models: ", made.status().message()));
  }
  root_ = *std::move(made);
  return root_;
}

absl::StatusOr<std::string> UploadFolders::Write(const std::string& model,
                                                 const std::map<std::string, std::string>& files) {
  RETURN_IF_ERROR(ValidateModelName(model));
  fs::path upload;
  {
    MutexLock lock(mu_);
    ASSIGN_OR_RETURN(std::string root, Root());
    upload = fs::path(root) / std::to_string(next_++);
  }
  const fs::path dir = upload / model;
  std::error_code ec;
  fs::create_directories(dir, ec);
  auto fail = [&](absl::Status status) {
    std::error_code ignored;
    fs::remove_all(upload, ignored);
    return status;
  };
  if (ec) return fail(absl::UnavailableError(absl::StrCat("cannot make ", dir.string(), ": ", ec.message())));
  for (const auto& [path, content] : files) {
    if (absl::Status s = CheckUploadPath(path); !s.ok()) {
      return fail(absl::InvalidArgumentError(absl::StrCat("file:", path.substr(0, 128), ": ", s.message())));
    }
    const fs::path target = dir / path;
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      return fail(absl::UnavailableError(absl::StrCat("cannot make a folder for file:", path, ": ", ec.message())));
    const int fd = open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      return fail(absl::InvalidArgumentError(absl::StrCat("file:", path.substr(0, 128), ": cannot be written (",
                                                          std::strerror(errno), "); is it named twice?")));
    }
    size_t written = 0;
    while (written < content.size()) {
      const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = errno;
        close(fd);
        return fail(absl::UnavailableError(absl::StrCat("file:", path, ": write failed: ", std::strerror(err))));
      }
      written += static_cast<size_t>(n);
    }
    close(fd);
  }
  return dir.string();
}

void UploadFolders::Remove(const std::string& model_dir) {
  const fs::path upload = fs::path(model_dir).parent_path();
  MutexLock lock(mu_);
  if (root_.empty() || upload.parent_path() != fs::path(root_)) return;  // only folders made here
  std::error_code ec;
  fs::remove_all(upload, ec);
}

}  // namespace infergate
