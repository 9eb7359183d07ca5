#include "scheduler/repository/model_name.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace infergate {

absl::Status ValidateModelName(absl::string_view name, absl::string_view field) {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": model name is empty"));
  std::string shown = absl::CHexEscape(name.substr(0, 64));
  if (name.size() > kMaxModelNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": model name '", shown, "...' is longer than ", kMaxModelNameLength, " characters"));
  }
  if (name.front() == '.') {
    return absl::InvalidArgumentError(absl::StrCat(field, ": model name '", shown, "' may not start with '.'"));
  }
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": model name '", shown, "' may only contain letters, digits, '_', '-' and '.'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace infergate
