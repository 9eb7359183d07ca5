#pragma once
// Why a request runs somewhere other than where it was headed: a typed kind
// plus a detail, decided once by route planning or the failure policy and
// only turned into text at the edge (the wire's "kind:detail", metric labels).

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace infergate {

enum class FallbackKind {
  kDeviceUnavailable,   // the requested device is not on this server; detail: what was asked for
  kDeviceOutOfService,  // the device failed recently and is cooling down; detail: the device id
  kDeviceNotAllowed,    // the model's config does not allow the device; detail: the device id
  kUnsupportedOp,       // the device lacks an op the model uses; detail: "aten::op"
  kDtype,               // the device cannot hold a dtype the model uses; detail: "float64"
  kOutOfMemory,         // the device ran out of memory even after evicting; no detail
  kDeviceError,         // the device itself failed while running; detail: the device id
  kNoCompiledVariant,   // a .pt2 package holds no build for the device; detail: its kind ("cuda")
  kDemoted,             // `auto` would run it on an accelerator it was demoted from to make room, and
                        // it answers from a ready copy while it moves back; detail: that device id
};

// The metric label and the wire prefix: "device_unavailable", "oom", ...
absl::string_view FallbackKindName(FallbackKind kind);

struct FallbackReason {
  FallbackKind kind = FallbackKind::kDeviceUnavailable;
  std::string detail;

  // The wire form: "unsupported_op:aten::max_pool2d", or the bare kind when
  // there is no detail ("oom").
  std::string ToString() const;
  // The inverse, for the state file that persists learned reasons; nullopt
  // for text no ToString() could have produced.
  static std::optional<FallbackReason> Parse(absl::string_view text);
  friend bool operator==(const FallbackReason&, const FallbackReason&) = default;
};

}  // namespace infergate
