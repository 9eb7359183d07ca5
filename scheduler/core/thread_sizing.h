#pragma once
// How the CPU's cores are shared: CPU workers (each runs one batch at a
// time) and LibTorch's intra-op threads per batch. Sized once, at start:
// the process (main.cc) applies the intra-op count process-wide; the core
// makes its CPU workers from the same sizing.

#include <string>

#include "devices/device_id.h"
#include "infergate/v1/model_config.pb.h"
#include "scheduler/routing/scheduler_options.h"

namespace infergate {

// `options` with cpu_workers and intra_op_threads filled in where they are
// 0: min(cores, 4) workers, and cores / workers threads each (at least 1).
// Pure.
SchedulerOptions WithThreadsSized(SchedulerOptions options, int cores);

// How many batches of one model may run at once on a device of `kind` with
// `sized` options: the CPU's workers; on an accelerator its workers, or as
// many as the model's accelerator_instances ask for (the executor grows to
// that; device_executor.h). The instances a model that runs one call at a
// time per instance (an AOTInductor package) is opened with. Pure.
int ModelRunsAtOnce(const SchedulerOptions& sized, DeviceKind kind, const v1::ModelConfig& config);

// Sets LibTorch's intra-op threads, and the BLAS's own pool, to `threads`
// for the whole process. Returns how the BLAS was told ("" when it could
// not be), for the log.
std::string ApplyIntraOpThreads(int threads);

}  // namespace infergate
