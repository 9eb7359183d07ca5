#include "devices/device_failure.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "devices/simulation.h"

namespace infergate {
namespace {
constexpr char kPayloadUrl[] = "type.infergate.dev/device-failure";

const char* KindName(DeviceFailure kind) {
  switch (kind) {
    case DeviceFailure::kUnsupportedOp: return "unsupported_op";
    case DeviceFailure::kDtype: return "dtype";
    case DeviceFailure::kOutOfMemory: return "oom";
    case DeviceFailure::kDeviceError: return "device_error";
    case DeviceFailure::kTooLarge: return "too_large";
    case DeviceFailure::kNoCompiledVariant: return "no_compiled_variant";
  }
  return "unknown";
}
}  // namespace

absl::Status WithDeviceFailure(absl::Status status, DeviceFailure kind, absl::string_view detail) {
  status.SetPayload(kPayloadUrl, absl::Cord(absl::StrCat(KindName(kind), "|", detail)));
  return status;
}

std::optional<DeviceFailureInfo> DeviceFailureOf(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kPayloadUrl);
  if (!payload) return std::nullopt;
  std::string text(*payload);
  size_t bar = text.find('|');
  std::string kind = text.substr(0, bar);
  std::string detail = bar == std::string::npos ? "" : text.substr(bar + 1);
  for (DeviceFailure k : {DeviceFailure::kUnsupportedOp, DeviceFailure::kDtype, DeviceFailure::kOutOfMemory,
                          DeviceFailure::kDeviceError, DeviceFailure::kTooLarge, DeviceFailure::kNoCompiledVariant}) {
    if (kind == KindName(k)) return DeviceFailureInfo{k, detail};
  }
  return std::nullopt;
}

std::string UnsupportedOpFromMessage(absl::string_view message) {
  constexpr absl::string_view kPrefix = "The operator '";
  size_t start = message.find(kPrefix);
  if (start == absl::string_view::npos) return "";
  start += kPrefix.size();
  size_t end = message.find('\'', start);
  if (end == absl::string_view::npos) return "";
  // Real messages carry the overload ("aten::foo.out"); the table keys on the op.
  return OpBaseName(message.substr(start, end - start));
}

}  // namespace infergate
