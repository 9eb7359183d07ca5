#include "scheduler/repository/repository_scan.h"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/folder_entries.h"
#include "common/status_macros.h"
#include "scheduler/repository/model_name.h"
#include "scheduler/repository/model_repository.h"

namespace infergate {

namespace fs = std::filesystem;

FileStamp StampFile(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  FileStamp stamp;
  stamp.size = static_cast<uint64_t>(st.st_size);
  stamp.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  stamp.inode = static_cast<uint64_t>(st.st_ino);
  stamp.package = absl::EndsWith(path, ".pt2");
  return stamp;
}

std::string VersionModelFile(const std::string& version_dir) {
  const std::string package = (fs::path(version_dir) / "model.pt2").string();
  if (StampFile(package).exists()) return package;
  return (fs::path(version_dir) / "model.pt").string();
}

absl::StatusOr<DiskModel> ScanModel(const std::string& root, const std::string& name) {
  RETURN_IF_ERROR(ValidateModelName(name));  // never a path outside the repository
  std::error_code ec;
  if (!fs::is_directory(fs::path(root) / name, ec)) {
    return UnknownModelError(name);
  }
  return ScanModelFolder((fs::path(root) / name).string(), name);
}

absl::StatusOr<DiskModel> ScanModelFolder(const std::string& model_dir, const std::string& name) {
  const fs::path dir(model_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("model folder '", model_dir.substr(0, 256), "' is not a directory"));
  }
  DiskModel model;
  model.name = name;
  model.config = StampFile((dir / "config.pbtxt").string());
  std::error_code read_error;
  const std::vector<fs::directory_entry> entries = FolderEntries(dir, &read_error);
  // A folder that cannot be read whole is not taken for one without the
  // versions it could not list (the poller would unload them).
  if (read_error) {
    return absl::UnavailableError(
        absl::StrCat("model folder '", model_dir.substr(0, 256), "' cannot be read: ", read_error.message()));
  }
  for (const fs::directory_entry& sub : entries) {
    // A version folder is named by its number as written plainly ("1", never
    // "01"), so no two folders can claim one version; others are ignored.
    const std::string folder = sub.path().filename().string();
    absl::StatusOr<int64_t> v = ParseVersion(folder, "version");
    if (!v.ok() || folder != std::to_string(*v) || !sub.is_directory(ec)) continue;
    FileStamp stamp = StampFile(VersionModelFile(sub.path().string()));
    if (stamp.exists()) model.versions[*v] = stamp;
  }
  return model;
}

absl::StatusOr<DiskRepository> ScanRepository(const std::string& root) {
  std::error_code ec;
  const std::vector<fs::directory_entry> entries = FolderEntries(root, &ec);
  if (ec) return absl::NotFoundError(absl::StrCat("model repository '", root, "' cannot be read: ", ec.message()));
  DiskRepository out;
  for (const fs::directory_entry& sub : entries) {
    std::string name = sub.path().filename().string();
    if (!sub.is_directory(ec) || !ValidateModelName(name).ok()) continue;
    absl::StatusOr<DiskModel> model = ScanModel(root, name);
    // A model folder that could not be read whole fails the scan: the
    // poller keeps serving what it knows rather than unload its versions.
    if (absl::IsUnavailable(model.status())) return model.status();
    if (model.ok()) out.emplace(name, *std::move(model));
  }
  return out;
}

}  // namespace infergate
