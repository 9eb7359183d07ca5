#include "tools/bench.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "infergate/v1/inference.grpc.pb.h"
#include "tools/closed_loop.h"

namespace infergate::tools {
namespace {

using Clock = std::chrono::steady_clock;

struct Call {
  grpc::ClientContext ctx;
  grpc::Status status;
  v1::InferResponse infer;
  grpc::health::v1::HealthCheckResponse health;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::InferResponse>> infer_rpc;
  std::unique_ptr<grpc::ClientAsyncResponseReader<grpc::health::v1::HealthCheckResponse>> health_rpc;
  Clock::time_point start;
};

}  // namespace

BenchResult BenchResult::Failed(const absl::Status& why) {
  BenchResult failed;
  failed.errors[std::string(why.message())] = 1;
  return failed;
}

void BenchResult::Merge(const BenchResult& part) {
  ok += part.ok;
  rows += part.rows;
  for (const auto& [code, n] : part.errors) errors[code] += n;
  latency_us.insert(latency_us.end(), part.latency_us.begin(), part.latency_us.end());
  overhead_us.insert(overhead_us.end(), part.overhead_us.begin(), part.overhead_us.end());
  queue_us.insert(queue_us.end(), part.queue_us.begin(), part.queue_us.end());
  for (const auto& [size, n] : part.batch_sizes) batch_sizes[size] += n;
  for (const auto& [device, n] : part.devices) devices[device] += n;
}

double BenchResult::Percentile(const std::vector<double>& v, double q) const {
  if (v.empty()) return 0;
  std::vector<double> s = v;
  size_t k = static_cast<size_t>(q * static_cast<double>(s.size() - 1));
  std::nth_element(s.begin(), s.begin() + static_cast<long>(k), s.end());
  return s[k];
}

std::string BenchResult::Summary() const {
  std::string out = absl::StrFormat(
      "requests=%d seconds=%.2f req/s=%.1f rows/s=%.1f p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f p999_ms=%.3f "
      "server_overhead_p50_us=%.1f server_queue_p50_us=%.1f",
      ok, seconds, seconds > 0 ? ok / seconds : 0, seconds > 0 ? rows / seconds : 0, Percentile(latency_us, 0.5) / 1000,
      Percentile(latency_us, 0.9) / 1000, Percentile(latency_us, 0.99) / 1000, Percentile(latency_us, 0.999) / 1000,
      Percentile(overhead_us, 0.5), Percentile(queue_us, 0.5));
  uint64_t batched = 0, total = 0;
  for (const auto& [size, n] : batch_sizes) {
    total += n;
    batched += size * n;
  }
  if (total > 0) {
    absl::StrAppend(&out, absl::StrFormat(" mean_batch=%.2f", static_cast<double>(batched) / total));
    // The answers per batch size they ran in: "1:120,2:40,...".
    std::vector<std::string> sizes;
    for (const auto& [size, n] : batch_sizes) sizes.push_back(absl::StrCat(size, ":", n));
    absl::StrAppend(&out, " batches=", absl::StrJoin(sizes, ","));
  }
  for (const auto& [device, n] : devices) absl::StrAppend(&out, " device[", device, "]=", n);
  uint64_t failed = 0;
  for (const auto& [code, n] : errors) failed += n;
  absl::StrAppend(&out, " errors=", failed);
  for (const auto& [code, n] : errors) absl::StrAppend(&out, " ", code, "=", n);
  return out;
}

BenchResult RunBench(const BenchOptions& options, const v1::InferRequest& request) {
  std::vector<std::unique_ptr<v1::InferenceService::Stub>> infer_stubs;
  std::vector<std::unique_ptr<grpc::health::v1::Health::Stub>> health_stubs;
  absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> channels =
      MakeChannels(options.connection, options.channels);
  if (!channels.ok()) return BenchResult::Failed(channels.status());
  for (const auto& channel : *channels) {
    infer_stubs.push_back(v1::InferenceService::NewStub(channel));
    health_stubs.push_back(grpc::health::v1::Health::NewStub(channel));
  }
  int64_t rows_per_request = 1;
  if (request.inputs_size() > 0 && request.inputs(0).shape_size() > 0) rows_per_request = request.inputs(0).shape(0);
  const bool health = options.rpc == "health";
  grpc::health::v1::HealthCheckRequest health_request;

  grpc::CompletionQueue cq;
  BenchResult result;
  Clock::time_point begin = Clock::now();
  Clock::time_point measure_from = begin + std::chrono::microseconds(static_cast<int64_t>(options.warmup_s * 1e6));
  Clock::time_point end = measure_from + std::chrono::microseconds(static_cast<int64_t>(options.duration_s * 1e6));
  uint64_t issued = 0;

  auto start_call = [&]() {
    auto* call = new Call();
    call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(options.timeout_ms));
    Authorize(call->ctx, options.connection);
    call->start = Clock::now();
    size_t lane = issued++ % infer_stubs.size();
    if (health) {
      call->health_rpc = health_stubs[lane]->AsyncCheck(&call->ctx, health_request, &cq);
      call->health_rpc->Finish(&call->health, &call->status, call);
    } else {
      call->infer_rpc = infer_stubs[lane]->AsyncInfer(&call->ctx, request, &cq);
      call->infer_rpc->Finish(&call->infer, &call->status, call);
    }
  };
  RunClosedLoop<Call>(cq, options.concurrency, end, start_call, [&](std::unique_ptr<Call> call, Clock::time_point now) {
    if (call->start < measure_from || now > end) return;
    if (!call->status.ok()) {
      result.errors[GrpcCodeName(call->status.error_code())]++;
      return;
    }
    result.ok++;
    result.rows += static_cast<uint64_t>(rows_per_request);
    result.latency_us.push_back(std::chrono::duration<double, std::micro>(now - call->start).count());
    if (!health) {
      const v1::Timing& t = call->infer.timing();
      result.overhead_us.push_back(static_cast<double>(t.total_us()) - static_cast<double>(t.compute_us()));
      result.queue_us.push_back(static_cast<double>(t.queue_us()));
      result.batch_sizes[call->infer.placement().batch_size()]++;
      result.devices[call->infer.placement().device()]++;
    }
  });
  result.seconds = std::chrono::duration<double>(std::min(Clock::now(), end) - measure_from).count();
  return result;
}

}  // namespace infergate::tools
