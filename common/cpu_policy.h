#pragma once
// The Linux scheduling policy of a thread, for one decision: which threads
// may take a core from a running thread the moment they wake up.
//
// Under the normal policy (SCHED_OTHER) a thread that wakes, say a gRPC
// thread whose socket became readable, usually preempts the thread running
// on its core. When the cores are all busy that is a device worker in the
// middle of a forward pass: it is switched out, and the pass finishes later
// with its caches cooled. Threads under SCHED_BATCH get the same share of
// the CPU (the nice value is unchanged) but do not preempt on waking: they
// run on an idle core at once, else when the running thread sleeps or its
// slice ends. On an idle machine nothing changes.
//
// infergate runs the threads that only move requests (gRPC's, the HTTP
// server's, the completion-queue pollers, its own helpers) under
// SCHED_BATCH, and the threads that do a device's work requests wait for
// under SCHED_OTHER: its device workers, the lanes that load models for
// requests held on arrival and the placement controller's thread, whose
// moves requests may wait for (main.cc sets the main thread before it
// starts any other, so they inherit it; each of those sets its own,
// UseNormalCpuPolicyForDeviceWork). What SCHED_BATCH changed, measured:
// bench/results/README.md. With the lanes under SCHED_BATCH, 12-14% of a
// churn run's loads on arrival ended more than 2 ms past their estimate
// on the busy 2-core host; under SCHED_OTHER 8-10% (docs/benchmarks.md).
//
// Threading: each call reads or sets the calling thread only. Threads it
// starts afterwards inherit its policy.

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

enum class CpuPolicy {
  kNormal,  // SCHED_OTHER: may preempt on waking
  kBatch,   // SCHED_BATCH: waits for an idle core or the running thread's turn to end
};

// "normal" or "batch" (as the --io-thread-policy flag spells them).
absl::StatusOr<CpuPolicy> ParseCpuPolicy(absl::string_view name);
absl::string_view CpuPolicyName(CpuPolicy policy);

// Sets the calling thread's policy (nice value kept). Fails where the system
// has no such policy (not Linux) or refuses it (a seccomp filter).
absl::Status SetThisThreadCpuPolicy(CpuPolicy policy);

// For a thread that does work requests wait for on a device (a device
// worker; a lane of loads that requests are held for, arrival_loads.h; the
// placement controller's moves, placement_controller.h):
// the normal policy, whatever the thread that started it runs under, so
// it takes a core as soon as it wakes (from a transfer's wait, say)
// rather than when the running thread's turn ends. A refusal is logged,
// at most once a second; `what` names the thread in it.
void UseNormalCpuPolicyForDeviceWork(absl::string_view what);

}  // namespace infergate
