#include "service/open_inference/open_inference_extensions.h"

#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "common/status_macros.h"

namespace infergate {
namespace {

const char* KindName(SharedMemoryKind kind) {
  return kind == SharedMemoryKind::kSystem ? "system shared memory" : "CUDA shared memory";
}

}  // namespace

absl::Status SharedMemoryStatus(SharedMemoryKind kind, absl::string_view name) {
  if (name.empty()) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("no ", KindName(kind), " region '", name.substr(0, 64),
                                          "' is registered: this server takes no shared memory regions"));
}

absl::Status SharedMemoryRegister(SharedMemoryKind kind, absl::string_view name) {
  return absl::UnimplementedError(absl::StrCat(
      KindName(kind), " is not supported, so region '", name.substr(0, 64),
      "' cannot be registered: this server takes tensors only in the request itself (raw_input_contents over gRPC, "
      "the binary tensor data extension over REST), where each request's bytes are counted against its memory "
      "budget and the request can be routed to any device or replica"));
}

absl::Status SharedMemoryUnregister(SharedMemoryKind kind, absl::string_view name) {
  return SharedMemoryStatus(kind, name);  // nothing to unregister: every region is already gone
}

absl::StatusOr<LogSettings> ChangeLogSettings(const LogSettings& changes) {
  static Mutex mu;  // a change reads, then sets, the level
  MutexLock lock(mu);
  if (!changes.empty()) {
    ASSIGN_OR_RETURN(LogLevel level, ApplyLogSettings(MinLogLevel(), changes));
    SetMinLogLevel(level);
  }
  return DescribeLogSettings(MinLogLevel());
}

}  // namespace infergate
