#include "service/open_inference/log_settings.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace infergate {
namespace {

constexpr const char* kKnown = "log_verbose_level, log_info, log_warning, log_error, log_format, log_file";

template <typename T>
absl::StatusOr<T> ValueOf(const std::string& key, const LogSettingValue& value, const char* expected) {
  if (const T* v = std::get_if<T>(&value)) return *v;
  return absl::InvalidArgumentError(absl::StrCat("settings.", key, ": expected ", expected));
}

}  // namespace

LogSettings DescribeLogSettings(LogLevel level) {
  LogSettings s;
  s["log_verbose_level"] = uint32_t{level <= LogLevel::kDebug ? 1u : 0u};
  s["log_info"] = level <= LogLevel::kInfo;
  s["log_warning"] = level <= LogLevel::kWarning;
  s["log_error"] = true;
  s["log_format"] = std::string("default");
  s["log_file"] = std::string();
  return s;
}

absl::StatusOr<LogLevel> ApplyLogSettings(LogLevel current, const LogSettings& changes) {
  std::optional<bool> verbose, info, warning;  // what `changes` names
  for (const auto& [key, value] : changes) {
    if (key == "log_verbose_level") {
      ASSIGN_OR_RETURN(uint32_t v, ValueOf<uint32_t>(key, value, "an unsigned integer"));
      verbose = v > 0;
    } else if (key == "log_info" || key == "log_warning" || key == "log_error") {
      ASSIGN_OR_RETURN(bool v, ValueOf<bool>(key, value, "a bool"));
      if (key == "log_info") info = v;
      if (key == "log_warning") warning = v;
      if (key == "log_error" && !v) {
        return absl::InvalidArgumentError("settings.log_error: errors are always logged; it cannot be false");
      }
    } else if (key == "log_format") {
      ASSIGN_OR_RETURN(std::string v, ValueOf<std::string>(key, value, "a string"));
      if (v != "default") {
        return absl::InvalidArgumentError(
            absl::StrCat("settings.log_format: '", v.substr(0, 32), "' is not served; the only format is \"default\""));
      }
    } else if (key == "log_file") {
      ASSIGN_OR_RETURN(std::string v, ValueOf<std::string>(key, value, "a string"));
      if (!v.empty()) {
        return absl::InvalidArgumentError(
            "settings.log_file: this server logs to standard error only (where the container runtime collects it); "
            "it must be \"\"");
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("settings.", key.substr(0, 64), ": not a log setting (", kKnown, ")"));
    }
  }
  // Levels nest. What is named wins; a level not named follows its
  // neighbours (verbose on turns info and warning on; warning off turns
  // info and verbose off), else keeps its value. Named values that leave a
  // hole are refused.
  constexpr const char* kNest = " (levels nest: debug, info, warning, error)";
  if (verbose.value_or(false) && info.has_value() && !*info) {
    return absl::InvalidArgumentError(
        absl::StrCat("settings.log_info: cannot be false while log_verbose_level is above 0", kNest));
  }
  if ((verbose.value_or(false) || info.value_or(false)) && warning.has_value() && !*warning) {
    return absl::InvalidArgumentError(
        absl::StrCat("settings.log_warning: cannot be false while ",
                     info.value_or(false) ? "log_info is true" : "log_verbose_level is above 0", kNest));
  }
  bool v = verbose.value_or(current <= LogLevel::kDebug);
  bool i = info.value_or(current <= LogLevel::kInfo);
  bool w = warning.value_or(current <= LogLevel::kWarning);
  if (v && !info.has_value()) i = true;
  if ((v || i) && !warning.has_value()) w = true;
  if (!w && !info.has_value()) i = false;
  if (!i && !verbose.has_value()) v = false;
  if (v) return LogLevel::kDebug;
  if (i) return LogLevel::kInfo;
  if (w) return LogLevel::kWarning;
  return LogLevel::kError;
}

}  // namespace infergate
