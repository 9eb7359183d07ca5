#include "model_store/model_upload.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "model_store/model_name.h"
#include "model_store/model_repository.h"

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

bool IsVersionModelFile(absl::string_view path) {
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  return parts.size() == 2 && parts[1] == "model.pt" && ParseVersion(parts[0], "version").ok() &&
         std::to_string(*ParseVersion(parts[0], "version")) == parts[0];
}

UploadFolders::~UploadFolders() {
  if (root_.empty()) return;
  std::error_code ec;
  fs::remove_all(root_, ec);
}

absl::StatusOr<std::string> UploadFolders::Root() {
  if (!root_.empty()) return root_;
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  if (ec) tmp = "/tmp";
  std::string pattern = (tmp / "infergate-uploads-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot make a folder for uploaded models under ", tmp.string(), ": ",
                                               std::strerror(errno)));
  }
  root_ = pattern;
  return root_;
}

absl::StatusOr<std::string> UploadFolders::Write(const std::string& model,
                                                 const std::map<std::string, std::string>& files) {
  if (absl::Status s = ValidateModelName(model); !s.ok()) return s;
  fs::path upload;
  {
    MutexLock lock(mu_);
    absl::StatusOr<std::string> root = Root();
    if (!root.ok()) return root.status();
    upload = fs::path(*root) / std::to_string(next_++);
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
    if (ec) return fail(absl::UnavailableError(absl::StrCat("cannot make a folder for file:", path, ": ", ec.message())));
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
