#include "service/modelmesh/model_mesh_path.h"

#include <filesystem>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/folder_entries.h"
#include "common/status_macros.h"
#include "scheduler/repository/repository_scan.h"

namespace infergate {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxPathChars = 4096;

absl::Status Invalid(absl::string_view why) { return absl::InvalidArgumentError(absl::StrCat("modelPath: ", why)); }

// A folder the repository would read as a model (ScanModelFolder's rule):
// a config.pbtxt, or a version folder holding a model file.
bool IsModelFolder(const fs::path& dir) {
  if (StampFile((dir / "config.pbtxt").string()).exists()) return true;
  absl::StatusOr<DiskModel> model = ScanModelFolder(dir.string(), "");
  return model.ok() && !model->versions.empty();
}

bool IsUnder(const fs::path& path, const fs::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (r->empty()) continue;  // a trailing separator
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

// OK when every entry under `dir` (a model folder), symbolic links
// resolved, lies under `root`: a version folder or file that links out
// would let the SPI read any file the server can.
absl::Status CheckTreeUnder(const fs::path& dir, const fs::path& root, const std::string& shown) {
  constexpr size_t kMaxEntries = 100000;
  std::error_code ec;
  size_t seen = 0;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (++seen > kMaxEntries) return Invalid(absl::StrCat("'", shown, "' holds more than ", kMaxEntries, " files"));
    if (!it->is_symlink(ec)) continue;
    std::error_code link_ec;
    const fs::path target = fs::canonical(it->path(), link_ec);
    if (link_ec || !IsUnder(target, root)) {
      return Invalid(absl::StrCat("'", shown, "': ", it->path().lexically_relative(dir).string().substr(0, 128),
                                  " is a symbolic link that leads outside the model root"));
    }
  }
  if (ec) return Invalid(absl::StrCat("'", shown, "' cannot be read: ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ResolveModelMeshPath(const std::string& model_path, const std::string& root) {
  if (model_path.empty()) return Invalid("is empty");
  if (model_path.size() > kMaxPathChars || model_path.find('\0') != std::string::npos) {
    return Invalid("is not a usable path");
  }
  const std::string shown = model_path.substr(0, 256);
  if (model_path.front() != '/') return Invalid(absl::StrCat("'", shown, "' is not an absolute path"));
  std::error_code ec;
  const fs::path real = fs::canonical(model_path, ec);
  if (ec) return Invalid(absl::StrCat("'", shown, "' cannot be read: ", ec.message()));
  fs::path real_root;
  if (!root.empty()) {
    real_root = fs::canonical(root, ec);
    if (ec || !IsUnder(real, real_root)) {
      return Invalid(absl::StrCat("'", shown, "' is not under the model root this server serves from"));
    }
  }
  // What is served from inside the folder must stay under the root too.
  auto checked = [&](const fs::path& model) -> absl::StatusOr<std::string> {
    if (!root.empty()) {
      RETURN_IF_ERROR(CheckTreeUnder(model, real_root, shown));
    }
    return model.string();
  };
  if (!fs::is_directory(real, ec)) {
    return Invalid(absl::StrCat("'", shown, "' is not a folder; expected a model folder (config.pbtxt and ",
                                "<version>/model.pt)"));
  }
  if (IsModelFolder(real)) return checked(real);
  // A repository of one model.
  std::vector<fs::path> models;
  for (const fs::directory_entry& sub : FolderEntries(real, &ec)) {
    if (sub.is_directory(ec) && IsModelFolder(sub.path())) models.push_back(sub.path());
  }
  if (models.size() == 1) return checked(models.front());
  if (models.empty()) {
    return Invalid(absl::StrCat("'", shown, "' holds no model: expected config.pbtxt and <version>/model.pt, ",
                                "or one model folder holding them"));
  }
  return Invalid(absl::StrCat("'", shown, "' holds ", models.size(), " model folders; name one of them"));
}

absl::Status CheckModelMeshType(const std::string& model_type) {
  std::string format = absl::AsciiStrToLower(model_type.substr(0, model_type.find(':')));
  if (format.empty() || format == "pytorch" || format == "torchscript") return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("modelType: '", model_type.substr(0, 64),
                                                 "' is not served here; infergate serves pytorch (TorchScript)"));
}

}  // namespace infergate
