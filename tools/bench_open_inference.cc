#include "tools/bench_open_inference.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tools/closed_loop.h"

namespace infergate::tools {
namespace {

using Clock = std::chrono::steady_clock;

const char* Datatype(v1::DataType dtype) {
  switch (dtype) {
    case v1::FLOAT32: return "FP32";
    case v1::FLOAT16: return "FP16";
    case v1::BFLOAT16: return "BF16";
    case v1::FLOAT64: return "FP64";
    case v1::INT64: return "INT64";
    case v1::INT32: return "INT32";
    case v1::INT16: return "INT16";
    case v1::INT8: return "INT8";
    case v1::UINT8: return "UINT8";
    case v1::BOOL: return "BOOL";
    default: return "INVALID";
  }
}

std::string CodeName(grpc::StatusCode code) {
  std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "OTHER" : name;
}

// Records one answered request that started at `start`.
void Record(const inference::ModelInferResponse& response, int64_t rows, Clock::time_point start,
            Clock::time_point now, BenchResult* result) {
  result->ok++;
  result->rows += static_cast<uint64_t>(rows);
  result->latency_us.push_back(std::chrono::duration<double, std::micro>(now - start).count());
  const auto& p = response.parameters();
  if (auto it = p.find("batch_size"); it != p.end()) result->batch_sizes[static_cast<uint32_t>(it->second.int64_param())]++;
  if (auto it = p.find("device"); it != p.end()) result->devices[it->second.string_param()]++;
}

struct UnaryCall {
  grpc::ClientContext ctx;
  grpc::Status status;
  inference::ModelInferResponse response;
  std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> rpc;
  Clock::time_point start;
};

BenchResult RunUnary(const BenchOptions& options, const inference::ModelInferRequest& request, int64_t rows,
                     std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>>& stubs) {
  grpc::CompletionQueue cq;
  BenchResult result;
  Clock::time_point measure_from =
      Clock::now() + std::chrono::microseconds(static_cast<int64_t>(options.warmup_s * 1e6));
  Clock::time_point end = measure_from + std::chrono::microseconds(static_cast<int64_t>(options.duration_s * 1e6));
  uint64_t issued = 0;
  auto start_call = [&]() {
    auto* call = new UnaryCall();
    call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(options.timeout_ms));
    Authorize(call->ctx, options.connection);
    call->start = Clock::now();
    call->rpc = stubs[issued++ % stubs.size()]->AsyncModelInfer(&call->ctx, request, &cq);
    call->rpc->Finish(&call->response, &call->status, call);
  };
  RunClosedLoop<UnaryCall>(cq, options.concurrency, end, start_call,
                           [&](std::unique_ptr<UnaryCall> call, Clock::time_point now) {
                             if (call->start < measure_from || now > end) return;
                             if (call->status.ok()) {
                               Record(call->response, rows, call->start, now, &result);
                             } else {
                               result.errors[CodeName(call->status.error_code())]++;
                             }
                           });
  result.seconds = std::chrono::duration<double>(std::min(Clock::now(), end) - measure_from).count();
  return result;
}

// One stream: a writer keeps `window` requests in flight, a reader matches
// answers to their start times by id.
void RunOneStream(const BenchOptions& options, inference::ModelInferRequest request, int64_t rows, int window,
                  inference::GRPCInferenceService::Stub& stub, Clock::time_point measure_from, Clock::time_point end,
                  BenchResult* result, std::mutex* result_mu) {
  grpc::ClientContext ctx;
  Authorize(ctx, options.connection);
  std::unique_ptr<grpc::ClientReaderWriter<inference::ModelInferRequest, inference::ModelStreamInferResponse>> rw =
      stub.ModelStreamInfer(&ctx);
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  std::map<uint64_t, Clock::time_point> started;
  std::thread reader([&] {
    inference::ModelStreamInferResponse response;
    BenchResult mine;
    while (rw->Read(&response)) {
      Clock::time_point now = Clock::now();
      uint64_t id = 0;
      (void)absl::SimpleAtoi(response.infer_response().id(), &id);
      Clock::time_point start;
      {
        std::lock_guard<std::mutex> lock(mu);
        start = started[id];
        started.erase(id);
        --in_flight;
      }
      cv.notify_one();
      if (start >= measure_from && now <= end) {
        if (response.error_message().empty()) {
          Record(response.infer_response(), rows, start, now, &mine);
        } else {
          mine.errors["IN_BAND"]++;
        }
      }
    }
    std::lock_guard<std::mutex> lock(*result_mu);
    result->ok += mine.ok;
    result->rows += mine.rows;
    result->latency_us.insert(result->latency_us.end(), mine.latency_us.begin(), mine.latency_us.end());
    for (const auto& [k, v] : mine.batch_sizes) result->batch_sizes[k] += v;
    for (const auto& [k, v] : mine.devices) result->devices[k] += v;
    for (const auto& [k, v] : mine.errors) result->errors[k] += v;
  });
  for (uint64_t id = 0;; ++id) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return in_flight < window; });
      if (Clock::now() >= end) break;
      ++in_flight;
      started[id] = Clock::now();
    }
    request.set_id(absl::StrCat(id));
    if (!rw->Write(request)) break;
  }
  rw->WritesDone();
  reader.join();
  grpc::Status status = rw->Finish();
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(*result_mu);
    result->errors[CodeName(status.error_code())]++;
  }
}

}  // namespace

inference::ModelInferRequest ToOpenInference(const v1::InferRequest& request) {
  inference::ModelInferRequest out;
  out.set_model_name(request.model());
  out.set_model_version(request.version());
  for (const v1::Tensor& t : request.inputs()) {
    inference::ModelInferRequest::InferInputTensor* in = out.add_inputs();
    in->set_name(t.name());
    in->set_datatype(Datatype(t.dtype()));
    for (int64_t d : t.shape()) in->add_shape(d);
    out.add_raw_input_contents(t.data());
  }
  if (!request.device().empty()) (*out.mutable_parameters())["device"].set_string_param(request.device());
  if (request.precision() != v1::AUTO) {
    (*out.mutable_parameters())["precision"].set_string_param(v1::Precision_Name(request.precision()));
  }
  if (request.fallback() == v1::DENY) (*out.mutable_parameters())["fallback"].set_string_param("DENY");
  return out;
}

BenchResult RunOpenInferenceBench(const BenchOptions& options, const inference::ModelInferRequest& request,
                                  bool stream) {
  absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> channels = MakeChannels(options.connection, options.channels);
  if (!channels.ok()) return BenchResult::Failed(channels.status());
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs;
  for (const auto& channel : *channels) stubs.push_back(inference::GRPCInferenceService::NewStub(channel));
  int64_t rows = 1;
  if (request.inputs_size() > 0 && request.inputs(0).shape_size() > 0) rows = request.inputs(0).shape(0);
  if (!stream) return RunUnary(options, request, rows, stubs);

  BenchResult result;
  std::mutex result_mu;
  Clock::time_point measure_from =
      Clock::now() + std::chrono::microseconds(static_cast<int64_t>(options.warmup_s * 1e6));
  Clock::time_point end = measure_from + std::chrono::microseconds(static_cast<int64_t>(options.duration_s * 1e6));
  // The window is spread over one stream per channel.
  int streams = static_cast<int>(stubs.size());
  std::vector<std::thread> threads;
  for (int s = 0; s < streams; ++s) {
    int window = options.concurrency / streams + (s < options.concurrency % streams ? 1 : 0);
    if (window == 0) continue;
    threads.emplace_back(RunOneStream, std::cref(options), request, rows, window, std::ref(*stubs[s]), measure_from,
                         end, &result, &result_mu);
  }
  for (auto& t : threads) t.join();
  result.seconds = std::chrono::duration<double>(std::min(Clock::now(), end) - measure_from).count();
  return result;
}

}  // namespace infergate::tools
