#include "devices/device_id.h"

#include <charconv>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace infergate {

absl::string_view DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kCuda: return "cuda";
    case DeviceKind::kMps: return "mps";
  }
  return "unknown";
}

std::string DeviceId::ToString() const {
  if (kind == DeviceKind::kCuda) return absl::StrCat("cuda:", index);
  return std::string(DeviceKindName(kind));
}

std::string DeviceRequest::ToString() const {
  if (automatic) return "auto";
  if (kind == DeviceKind::kCuda && !any_index) return absl::StrCat("cuda:", index);
  return std::string(DeviceKindName(kind));
}

absl::StatusOr<DeviceRequest> ParseDeviceRequest(absl::string_view text, absl::string_view field) {
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  DeviceRequest req;
  if (lower.empty() || lower == "auto") return req;
  req.automatic = false;
  if (lower == "cpu") {
    req.kind = DeviceKind::kCpu;
    return req;
  }
  if (lower == "mps") {
    req.kind = DeviceKind::kMps;
    return req;
  }
  if (lower == "cuda") {
    req.kind = DeviceKind::kCuda;
    req.any_index = true;
    return req;
  }
  absl::string_view rest = lower;
  if (absl::ConsumePrefix(&rest, "cuda:") && !rest.empty() && rest.size() <= 4) {
    int index = -1;
    auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), index);
    if (ec == std::errc() && ptr == rest.data() + rest.size() && index >= 0) {
      req.kind = DeviceKind::kCuda;
      req.index = index;
      return req;
    }
  }
  std::string shown(text.substr(0, 64));
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": unknown device '", shown, "'; expected \"\", \"auto\", \"cpu\", \"cuda\", \"cuda:N\" or \"mps\""));
}

}  // namespace infergate
