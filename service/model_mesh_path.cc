#include "service/model_mesh_path.h"

#include <filesystem>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model_store/repository_scan.h"

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
  if (!root.empty()) {
    const fs::path real_root = fs::canonical(root, ec);
    if (ec || !IsUnder(real, real_root)) {
      return Invalid(absl::StrCat("'", shown, "' is not under the model root this server serves from"));
    }
  }
  if (!fs::is_directory(real, ec)) {
    return Invalid(absl::StrCat("'", shown, "' is not a folder; expected a model folder (config.pbtxt and ",
                                "<version>/model.pt)"));
  }
  if (IsModelFolder(real)) return real.string();
  // A repository of one model.
  std::vector<fs::path> models;
  for (const fs::directory_entry& sub : fs::directory_iterator(real, ec)) {
    if (sub.is_directory(ec) && IsModelFolder(sub.path())) models.push_back(sub.path());
  }
  if (models.size() == 1) return models.front().string();
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
