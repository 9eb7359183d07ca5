#pragma once
// Per model version counters of what the core ran, in the shape of the Open
// Inference Protocol's statistics extension: requests that succeeded or
// failed with their cumulative durations, queue and compute time split into
// input (joining a batch), infer (the model) and output (splitting it),
// rows inferred, batches run, and per-batch-size figures. Every front end's
// requests count, since they are recorded in the core.
//
// Thread-safe; each record is one short lock.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace infergate {

struct DurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
  void Add(uint64_t duration_ns, uint64_t n = 1) {
    count += n;
    ns += duration_ns;
  }
};

struct BatchStat {
  DurationStat compute_input;
  DurationStat compute_infer;
  DurationStat compute_output;
};

struct ModelStats {
  std::string model;
  int64_t version = 0;
  uint64_t last_inference_ms = 0;  // since the epoch; 0 = never
  uint64_t inference_count = 0;    // rows
  uint64_t execution_count = 0;    // batches
  DurationStat success;            // requests answered with outputs; ns: request time in the server
  DurationStat fail;               // requests for this version answered with an error
  DurationStat queue;
  DurationStat compute_input;
  DurationStat compute_infer;
  DurationStat compute_output;
  std::map<uint64_t, BatchStat> batches;  // by batch size in rows
};

// Where one batch's time went, in nanoseconds.
struct BatchTimes {
  uint64_t input_ns = 0;
  uint64_t infer_ns = 0;
  uint64_t output_ns = 0;
};

class ModelStatistics {
 public:
  // One batch of `rows` rows ran.
  void RecordBatch(const std::string& model, int64_t version, uint64_t rows, const BatchTimes& times);
  // One request answered with outputs after `total_ns` in the server, of
  // which `queue_ns` waiting; `times` are its batch's.
  void RecordSuccess(const std::string& model, int64_t version, uint64_t total_ns, uint64_t queue_ns,
                     const BatchTimes& times);
  void RecordFailure(const std::string& model, int64_t version, uint64_t total_ns);

  // What was recorded for `model` (empty: all), ordered by model and version.
  std::vector<ModelStats> Snapshot(const std::string& model = "") const;

 private:
  ModelStats& At(const std::string& model, int64_t version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  std::map<std::pair<std::string, int64_t>, ModelStats> stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infergate
