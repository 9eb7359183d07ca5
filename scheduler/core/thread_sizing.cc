#include "scheduler/core/thread_sizing.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "devices/system_info.h"
#include "scheduler/repository/model_config.h"

namespace infergate {

SchedulerOptions WithThreadsSized(SchedulerOptions options, int cores) {
  cores = std::max(cores, 1);
  if (options.cpu_workers <= 0) options.cpu_workers = std::clamp(cores, 1, 4);
  if (options.intra_op_threads <= 0) options.intra_op_threads = std::max(1, cores / options.cpu_workers);
  return options;
}

int ModelRunsAtOnce(const SchedulerOptions& sized, DeviceKind kind, const v1::ModelConfig& config) {
  if (kind == DeviceKind::kCpu) return std::max(1, sized.cpu_workers);
  const int instances = static_cast<int>(std::min<uint32_t>(config.accelerator_instances(), kMaxAcceleratorInstances));
  return std::max({1, sized.accelerator_workers, instances});
}

std::string ApplyIntraOpThreads(int threads) {
  // Process-wide in LibTorch; each worker thread picks it up on first use.
  at::set_num_threads(threads);
  // The BLAS has a thread pool of its own, sized to every core by default.
  return SetBlasThreads(threads);
}

}  // namespace infergate
