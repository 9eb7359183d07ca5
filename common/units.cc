#include "common/units.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace infergate {

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  struct Unit {
    const char* suffix;
    double factor;
  };
  const Unit units[] = {{"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
                        {"kb", 1e3},     {"mb", 1e6},        {"gb", 1e9},           {"tb", 1e12},
                        {"k", 1024.0},   {"m", 1048576.0},   {"g", 1073741824.0},   {"b", 1.0}};
  double factor = 1.0;
  absl::string_view number = t;
  for (const Unit& u : units) {
    if (absl::ConsumeSuffix(&number, u.suffix)) {
      factor = u.factor;
      break;
    }
  }
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value) || value < 0 || !std::isfinite(value) ||
      value * factor > 1.8e19) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a byte size such as 2GiB or 512MiB"));
  }
  return static_cast<uint64_t>(value * factor);
}

absl::StatusOr<std::chrono::milliseconds> ParseDuration(absl::string_view text, absl::string_view flag) {
  absl::string_view number = absl::StripAsciiWhitespace(text);
  double scale = 1000;
  if (absl::ConsumeSuffix(&number, "ms")) {
    scale = 1;
  } else if (absl::ConsumeSuffix(&number, "s")) {
    scale = 1000;
  } else if (absl::ConsumeSuffix(&number, "m")) {
    scale = 60000;
  }
  double value = 0;
  if (!absl::SimpleAtod(number, &value) || !std::isfinite(value) || value < 0 || value * scale > 86400000.0) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", text, "' is not a duration such as 30s or 500ms"));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(value * scale));
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / (1u << 30));
  if (bytes >= (uint64_t{1} << 20)) return absl::StrFormat("%.2f MiB", static_cast<double>(bytes) / (1u << 20));
  if (bytes >= (uint64_t{1} << 10)) return absl::StrFormat("%.2f KiB", static_cast<double>(bytes) / (1u << 10));
  return absl::StrCat(bytes, " bytes");
}

}  // namespace infergate
