#pragma once
// Closed-loop load generator on gRPC's asynchronous client API: keeps
// `concurrency` calls outstanding for `duration` and reports throughput,
// latency percentiles and error codes.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "infergate/v1/inference.pb.h"
#include "tools/connection.h"

namespace infergate::tools {

struct BenchOptions {
  Connection connection;
  std::string rpc = "infer";  // "infer" or "health" (the gRPC floor)
  int concurrency = 8;
  double duration_s = 10;
  double warmup_s = 1;
  int channels = 1;
  int64_t timeout_ms = 30000;
};

struct BenchResult {
  uint64_t ok = 0;
  uint64_t rows = 0;
  std::map<std::string, uint64_t> errors;  // by gRPC code name
  double seconds = 0;
  std::vector<double> latency_us;            // client-side, successful calls
  std::vector<double> overhead_us;           // total_us - compute_us from the responses
  std::vector<double> queue_us;              // queue_us from the responses (submit to batch start)
  std::map<uint32_t, uint64_t> batch_sizes;  // placement.batch_size -> count
  std::map<std::string, uint64_t> devices;   // placement.device -> count

  // A run that could not start, with the reason as its one error.
  static BenchResult Failed(const absl::Status& why);
  // Adds another part of the same run (its counts, samples and errors; not
  // its seconds).
  void Merge(const BenchResult& part);
  double Percentile(const std::vector<double>& v, double q) const;
  std::string Summary() const;
};

// Sends `request` (for rpc "infer") over and over. Rows per request are read
// from the first input's leading dimension.
BenchResult RunBench(const BenchOptions& options, const v1::InferRequest& request);

}  // namespace infergate::tools
