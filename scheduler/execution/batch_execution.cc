#include "scheduler/execution/batch_execution.h"

#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/thread_cpu_time.h"
#include "scheduler/execution/batch_tensors.h"
#include "scheduler/model/string_tensor.h"
#include "scheduler/model/torch_status.h"

namespace infergate {

std::vector<TensorMeta> TensorMetas(const std::vector<NamedTensor>& inputs) {
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (const NamedTensor& t : inputs) {
    metas.push_back(
        {t.name, TensorDType(t.tensor).value_or(DType::kFloat32), {t.tensor.sizes().data(), t.tensor.sizes().size()}});
  }
  return metas;
}

int64_t BatchRun::total_rows() const {
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  return total;
}

BatchRun RunBatch(const Servable& servable, const std::vector<std::shared_ptr<Job>>& jobs, bool measure_thread_cpu) {
  BatchRun run;
  std::vector<std::vector<at::Tensor>> parts;
  for (const auto& job : jobs) {
    std::vector<TensorMeta> metas = TensorMetas(job->request.inputs);
    absl::StatusOr<std::vector<size_t>> order = MatchInputs(servable.signature(), metas, job->route.model->name);
    if (!order.ok()) {
      job->Finish(order.status());
      continue;
    }
    std::vector<at::Tensor> ordered;
    ordered.reserve(order->size());
    for (size_t i : *order) ordered.push_back(job->request.inputs[i].tensor);
    parts.push_back(std::move(ordered));
    run.rows.push_back(jobs.size() == 1 ? BatchRows(servable.signature(), metas) : job->rows);
    run.jobs.push_back(job);
  }
  if (run.jobs.empty()) return run;

  Clock::time_point start = Clock::now();
  uint64_t cpu_start = measure_thread_cpu ? ThreadCpuMicros() : 0;
  absl::StatusOr<std::vector<NamedTensor>> outputs;
  Clock::time_point joined = start;
  try {
    // Joining allocates the batch: it can fail like any allocation.
    std::vector<at::Tensor> batch = ConcatBatch(parts);
    joined = Clock::now();
    outputs = servable.Run(batch);
  } catch (const std::exception& e) {
    outputs = absl::ResourceExhaustedError(absl::StrCat(
        "model '", run.jobs[0]->route.model->name, "': cannot assemble the batch: ", ConciseTorchMessage(e.what())));
  }
  run.cpu_us = measure_thread_cpu ? ThreadCpuMicros() - cpu_start : 0;
  Clock::time_point ran = Clock::now();
  run.compute_us = MicrosBetween(start, ran);
  run.times.input_ns = NanosBetween(start, joined);
  run.times.infer_ns = NanosBetween(joined, ran);
  parts.clear();
  if (!outputs.ok()) {
    run.outputs = outputs.status();
    return run;
  }
  try {
    run.outputs = SplitBatch(*outputs, run.rows);
  } catch (const std::exception& e) {
    run.outputs = absl::InternalError(absl::StrCat("model '", run.jobs[0]->route.model->name,
                                                   "': cannot split the outputs: ", ConciseTorchMessage(e.what())));
  }
  run.times.output_ns = NanosBetween(ran, Clock::now());
  return run;
}

}  // namespace infergate
