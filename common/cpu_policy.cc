#include "common/cpu_policy.h"

#include <sched.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

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

absl::StatusOr<CpuPolicy> ThisThreadCpuPolicy() {
  const int policy = sched_getscheduler(0);
  if (policy == SCHED_OTHER) return CpuPolicy::kNormal;
  if (policy == SCHED_BATCH) return CpuPolicy::kBatch;
  if (policy < 0) return absl::ErrnoToStatus(errno, "sched_getscheduler");
  return absl::FailedPreconditionError(absl::StrCat("the thread runs under scheduling policy ", policy,
                                                    ", neither SCHED_OTHER nor SCHED_BATCH"));
}

#else

absl::Status SetThisThreadCpuPolicy(CpuPolicy policy) {
  if (policy == CpuPolicy::kNormal) return absl::OkStatus();
  return absl::UnimplementedError("SCHED_BATCH exists on Linux only");
}

absl::StatusOr<CpuPolicy> ThisThreadCpuPolicy() { return CpuPolicy::kNormal; }

#endif

}  // namespace infergate
