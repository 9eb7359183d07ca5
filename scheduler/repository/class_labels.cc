#include "scheduler/repository/class_labels.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace infergate {
namespace fs = std::filesystem;
namespace {

absl::StatusOr<std::vector<std::string>> ReadLabelFile(const fs::path& path, absl::string_view field) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ": cannot read ", path.filename().string(), ": ", ec.message()));
  }
  if (size > kMaxLabelFileBytes) {
    return absl::FailedPreconditionError(absl::StrCat(field, ": ", path.filename().string(), " holds ", size,
                                                      " bytes, more than a label file may (", kMaxLabelFileBytes, ")"));
  }
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    return absl::FailedPreconditionError(absl::StrCat(field, ": cannot read ", path.filename().string()));
  }
  std::vector<std::string> labels = absl::StrSplit(text, '\n');
  if (!labels.empty() && labels.back().empty()) labels.pop_back();  // the final newline
  for (std::string& label : labels) {
    if (!label.empty() && label.back() == '\r') label.pop_back();
  }
  return labels;
}

}  // namespace

const std::vector<std::string>* ClassLabels::For(const std::string& output) const {
  if (auto it = by_output.find(output); it != by_output.end()) return &it->second;
  return model_wide.empty() ? nullptr : &model_wide;
}

absl::Status CheckLabelFileName(absl::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != absl::string_view::npos ||
      name.find('\\') != absl::string_view::npos || name.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name.substr(0, 64), "' is not a file name in the model's folder"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ClassLabels>> ReadClassLabels(const std::string& dir,
                                                                   const v1::ModelConfig& config) {
  auto labels = std::make_shared<ClassLabels>();
  for (int i = 0; i < config.outputs_size(); ++i) {
    const v1::TensorSpec& out = config.outputs(i);
    if (out.label_filename().empty()) continue;
    const std::string field = absl::StrCat("outputs[", i, "].label_filename");
    if (absl::Status s = CheckLabelFileName(out.label_filename()); !s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(field, ": ", s.message()));
    }
    absl::StatusOr<std::vector<std::string>> read = ReadLabelFile(fs::path(dir) / out.label_filename(), field);
    if (!read.ok()) return read.status();
    labels->by_output[out.name()] = *std::move(read);
  }
  const fs::path model_wide = fs::path(dir) / "labels.txt";
  std::error_code ec;
  if (fs::is_regular_file(model_wide, ec)) {
    ASSIGN_OR_RETURN(labels->model_wide, ReadLabelFile(model_wide, "labels.txt"));
  }
  if (labels->by_output.empty() && labels->model_wide.empty()) return std::shared_ptr<const ClassLabels>();
  return std::shared_ptr<const ClassLabels>(std::move(labels));
}

}  // namespace infergate
