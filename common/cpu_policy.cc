#include "common/cpu_policy.h"

#include <sched.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace infergate {

absl::StatusOr<CpuPolicy> ParseCpuPolicy(absl::string_view name) {
  if (name == "normal") return CpuPolicy::kNormal;
  if (name == "batch") return CpuPolicy::kBatch;
  return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a CPU policy (normal or batch)"));
}

absl::string_view CpuPolicyName(CpuPolicy policy) { return policy == CpuPolicy::kBatch ? "batch" : "normal"; }

#if defined(__linux__)

absl::Status SetThisThreadCpuPolicy(CpuPolicy policy) {
  // On Linux, pid 0 is the calling thread; the static priority of both
  // policies is 0, and the nice value is left as it is.
  sched_param param{};
  param.sched_priority = 0;
  if (sched_setscheduler(0, policy == CpuPolicy::kBatch ? SCHED_BATCH : SCHED_OTHER, &param) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("sched_setscheduler(", CpuPolicyName(policy), ")"));
  }
  return absl::OkStatus();
}

#else

absl::Status SetThisThreadCpuPolicy(CpuPolicy policy) {
  if (policy == CpuPolicy::kNormal) return absl::OkStatus();
  return absl::UnimplementedError("SCHED_BATCH exists on Linux only");
}

#endif

void UseNormalCpuPolicyForDeviceWork(absl::string_view what) {
  static LogRateLimiter limiter(1);
  if (absl::Status s = SetThisThreadCpuPolicy(CpuPolicy::kNormal); !s.ok()) {
    if (uint64_t held = 0; limiter.Allow(&held)) LOG_WARNING << what << ": " << s.message() << SuppressedNote(held);
  }
}

}  // namespace infergate
