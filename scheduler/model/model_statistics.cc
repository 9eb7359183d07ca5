#include "scheduler/model/model_statistics.h"

#include <chrono>

namespace infergate {

ModelStats& ModelStatistics::At(const std::string& model, int64_t version) {
  ModelStats& s = stats_[{model, version}];
  if (s.model.empty()) {
    s.model = model;
    s.version = version;
  }
  return s;
}

void ModelStatistics::RecordBatch(const std::string& model, int64_t version, uint64_t rows, const BatchTimes& times) {
  uint64_t now_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  MutexLock lock(mu_);
  ModelStats& s = At(model, version);
  s.last_inference_ms = now_ms;
  s.inference_count += rows;
  s.execution_count += 1;
  BatchStat& b = s.batches[rows];
  b.compute_input.Add(times.input_ns);
  b.compute_infer.Add(times.infer_ns);
  b.compute_output.Add(times.output_ns);
}

void ModelStatistics::RecordSuccess(const std::string& model, int64_t version, uint64_t total_ns, uint64_t queue_ns,
                                    const BatchTimes& times) {
  MutexLock lock(mu_);
  ModelStats& s = At(model, version);
  s.success.Add(total_ns);
  s.queue.Add(queue_ns);
  s.compute_input.Add(times.input_ns);
  s.compute_infer.Add(times.infer_ns);
  s.compute_output.Add(times.output_ns);
}

void ModelStatistics::RecordFailure(const std::string& model, int64_t version, uint64_t total_ns) {
  MutexLock lock(mu_);
  At(model, version).fail.Add(total_ns);
}

std::vector<ModelStats> ModelStatistics::Snapshot(const std::string& model) const {
  MutexLock lock(mu_);
  std::vector<ModelStats> out;
  for (const auto& [key, s] : stats_) {
    if (model.empty() || key.first == model) out.push_back(s);
  }
  return out;
}

}  // namespace infergate
