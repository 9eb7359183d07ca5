#pragma once
// Execution of one batch on one servable: put each job's inputs in the
// model's order, join them, run, and split the outputs back per job. It
// knows nothing of queues, routing or failure handling; the scheduler
// decides what to do with a failed run.
//
// Runs on a device worker thread. Jobs whose inputs do not match the model
// are answered (INVALID_ARGUMENT) here and left out of the run.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/execution/job.h"
#include "scheduler/model/model_statistics.h"
#include "scheduler/model/servable.h"
#include "scheduler/repository/input_signature.h"

namespace infergate {

struct BatchRun {
  std::vector<std::shared_ptr<Job>> jobs;  // the jobs that took part, in order
  std::vector<int64_t> rows;               // rows of each
  // One output list per job, or the run's failure (for every job).
  absl::StatusOr<std::vector<std::vector<NamedTensor>>> outputs = std::vector<std::vector<NamedTensor>>{};
  uint64_t compute_us = 0;  // wall time of joining and running
  BatchTimes times;         // joining, running, splitting
  uint64_t cpu_us = 0;      // the worker thread's CPU time, when measured
  int64_t total_rows() const;
};

// The shapes and dtypes of `inputs`, as input matching reads them.
std::vector<TensorMeta> TensorMetas(const std::vector<NamedTensor>& inputs);

// `measure_thread_cpu`: also read the calling thread's CPU clock around the
// run (meaningful when the model runs on this thread alone).
BatchRun RunBatch(const Servable& servable, const std::vector<std::shared_ptr<Job>>& jobs, bool measure_thread_cpu);

}  // namespace infergate
