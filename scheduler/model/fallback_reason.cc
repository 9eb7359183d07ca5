#include "scheduler/model/fallback_reason.h"

#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

constexpr FallbackKind kAllKinds[] = {FallbackKind::kDeviceUnavailable,
                                      FallbackKind::kDeviceOutOfService,
                                      FallbackKind::kDeviceNotAllowed,
                                      FallbackKind::kUnsupportedOp,
                                      FallbackKind::kDtype,
                                      FallbackKind::kOutOfMemory,
                                      FallbackKind::kDeviceError,
                                      FallbackKind::kNoCompiledVariant,
                                      FallbackKind::kDemoted};

}  // namespace

absl::string_view FallbackKindName(FallbackKind kind) {
  switch (kind) {
    case FallbackKind::kDeviceUnavailable: return "device_unavailable";
    case FallbackKind::kDeviceOutOfService: return "device_out_of_service";
    case FallbackKind::kDeviceNotAllowed: return "device_not_allowed";
    case FallbackKind::kUnsupportedOp: return "unsupported_op";
    case FallbackKind::kDtype: return "dtype";
    case FallbackKind::kOutOfMemory: return "oom";
    case FallbackKind::kDeviceError: return "device_error";
    case FallbackKind::kNoCompiledVariant: return "no_compiled_variant";
    case FallbackKind::kDemoted: return "demoted";
  }
  return "unknown";
}

std::string FallbackReason::ToString() const {
  if (detail.empty()) return std::string(FallbackKindName(kind));
  return absl::StrCat(FallbackKindName(kind), ":", detail);
}

std::optional<FallbackReason> FallbackReason::Parse(absl::string_view text) {
  for (FallbackKind kind : kAllKinds) {
    absl::string_view name = FallbackKindName(kind);
    if (text == name) return FallbackReason{kind, ""};
    if (text.size() > name.size() + 1 && text.substr(0, name.size()) == name && text[name.size()] == ':') {
      return FallbackReason{kind, std::string(text.substr(name.size() + 1))};
    }
  }
  return std::nullopt;
}

}  // namespace infergate
