#include "scheduler/model/model_load_error.h"

#include <regex>

#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

std::string FirstMatch(const std::string& text, const std::regex& pattern, int group) {
  std::smatch m;
  return std::regex_search(text, m, pattern) ? m[group].str() : "";
}

// LibTorch's first line worth reading: its "[enforce fail at FILE:LINE] ."
// prefix dropped, and nothing from the C++ stack or the TorchScript source.
std::string FirstLine(const std::string& message) {
  std::string s = message;
  if (s.rfind("[enforce fail at ", 0) == 0) {
    size_t end = s.find("] ");
    if (end != std::string::npos) s = s.substr(end + 2);
    if (s.rfind(". ", 0) == 0) s = s.substr(2);
  }
  size_t start = s.find_first_not_of("\n ");
  s = start == std::string::npos ? "" : s.substr(start);
  s = s.substr(0, s.find('\n'));
  while (!s.empty() && (s.back() == ' ' || s.back() == ':')) s.pop_back();
  return s;
}

// What to do about a file saved by a newer PyTorch.
std::string SavedByANewerPyTorch(const std::string& libtorch_version) {
  return absl::StrCat("the model was saved by a newer PyTorch. Save it again with PyTorch ", libtorch_version,
                      " or older, or serve it from an infergate built on a newer LibTorch");
}

}  // namespace

absl::Status ModelLoadError(const std::string& model, const std::string& path, const std::string& libtorch_message,
                            const std::string& libtorch_version) {
  const std::string prefix = absl::StrCat("model '", model, "': cannot load ", path, ": ");
  static const std::regex kUnknownOp(R"(Unknown builtin op: ([A-Za-z0-9_:.]+?)\.?(\s|$))");
  static const std::regex kUnknownType(R"(Unknown type name '([^']+)')");
  static const std::regex kFileVersion(
      R"(PyTorch file with version (\d+), but the maximum supported version for reading is (\d+))");
  if (std::string op = FirstMatch(libtorch_message, kUnknownOp, 1); !op.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(prefix, "it calls ", op, ", which this server's LibTorch ",
                                                      libtorch_version, " does not have; ",
                                                      SavedByANewerPyTorch(libtorch_version)));
  }
  if (std::string type = FirstMatch(libtorch_message, kUnknownType, 1); !type.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(prefix, "it uses the type ", type,
                                                      ", which this server's LibTorch ", libtorch_version,
                                                      " does not know; ", SavedByANewerPyTorch(libtorch_version)));
  }
  std::smatch version;
  if (std::regex_search(libtorch_message, version, kFileVersion)) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "its file format version is ", version[1].str(), ", and this server's LibTorch ", libtorch_version,
        " reads versions up to ", version[2].str(), "; ", SavedByANewerPyTorch(libtorch_version)));
  }
  return absl::FailedPreconditionError(absl::StrCat(prefix, FirstLine(libtorch_message)));
}

}  // namespace infergate
