#include "devices/host_requirements.h"

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace infergate {

absl::Status CheckHostRequirements(const std::string& proc_root) {
#if !defined(__linux__)
  // Only Linux's LibTorch reads the CPU from /proc; elsewhere (macOS) there
  // is nothing to check.
  (void)proc_root;
  return absl::OkStatus();
#endif
  const std::string cpuinfo = proc_root + "/cpuinfo";
  absl::StatusOr<std::string> text = ReadFile(cpuinfo, "cpuinfo");
  if (!text.ok() || !absl::StrContains(*text, "processor")) {
    return absl::FailedPreconditionError(absl::StrCat(
        cpuinfo,
        " is missing or lists no processor: LibTorch needs the proc file system to detect the CPU. "
        "In a chroot, mount it first (mount -t proc proc ROOT/proc); container runtimes mount it themselves."));
  }
  return absl::OkStatus();
}

}  // namespace infergate
