#include "tools/bench_open_inference.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

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

// Records one answered request that started at `start`.
void Record(const inference::ModelInferResponse& response, int64_t rows, Clock::time_point start, Clock::time_point now,
            BenchResult* result) {
  result->ok++;
  result->rows += static_cast<uint64_t>(rows);
  result->latency_us.push_back(std::chrono::duration<double, std::micro>(now - start).count());
  const auto& p = response.parameters();
  if (auto it = p.find("batch_size"); it != p.end())
    result->batch_sizes[static_cast<uint32_t>(it->second.int64_param())]++;
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
                               result.errors[GrpcCodeName(call->status.error_code())]++;
                             }
                           });
  result.seconds = std::chrono::duration<double>(std::min(Clock::now(), end) - measure_from).count();
  return result;
}

// One stream driven by gRPC's callback API: `window` requests in flight;
// each answer frees a slot and queues the next write from the thread that
// read it, so a request costs the client one wake-up, as a unary call does.
// gRPC allows one write outstanding per stream: slots freed while one is on
// the wire are written from OnWriteDone.
class StreamDriver : public grpc::ClientBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse> {
 public:
  StreamDriver(const BenchOptions& options, inference::ModelInferRequest request, int64_t rows, int window,
               Clock::time_point measure_from, Clock::time_point end)
      : request_(std::move(request)), rows_(rows), measure_from_(measure_from), end_(end), started_(window) {
    Authorize(ctx_, options.connection);
    for (int slot = window - 1; slot >= 0; --slot) free_slots_.push_back(slot);
  }

  // Opens the stream; it runs on gRPC's threads until `end`.
  void Start(inference::GRPCInferenceService::Stub& stub) {
    stub.async()->ModelStreamInfer(&ctx_, this);
    StartRead(&response_);
    Step first;
    {
      std::lock_guard<std::mutex> lock(mu_);
      first = NextStep();
    }
    Act(first);
    StartCall();
  }

  // Waits until every answer is in and the stream has ended; returns what
  // it measured.
  BenchResult Finish() {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return done_; });
    if (!status_.ok()) result_.errors[GrpcCodeName(status_.error_code())]++;
    return std::move(result_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    Clock::time_point now = Clock::now();
    uint64_t slot = 0;
    (void)absl::SimpleAtoi(response_.infer_response().id(), &slot);
    Step next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (slot < started_.size()) {
        Clock::time_point start = started_[slot];
        if (start >= measure_from_ && now <= end_) {
          if (response_.error_message().empty()) {
            Record(response_.infer_response(), rows_, start, now, &result_);
          } else {
            result_.errors["IN_BAND"]++;
          }
        }
        free_slots_.push_back(static_cast<int>(slot));
      }
      next = NextStep();
    }
    StartRead(&response_);
    Act(next);
  }

  void OnWriteDone(bool ok) override {
    Step next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (!ok) closed_ = true;  // the stream is broken; OnDone follows
      next = NextStep();
    }
    Act(next);
  }

  void OnDone(const grpc::Status& status) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
    done_ = true;
    done_cv_.notify_all();
  }

 private:
  enum class Step { kNone, kWrite, kWriteMore, kClose };

  // What to do next, decided under mu_ and done after it is released (gRPC
  // may run a reaction inline): send a request into a free slot while no
  // write is outstanding and time is left; half-close once time is up and
  // every request is answered.
  Step NextStep() {
    if (writing_ || closed_) return Step::kNone;
    if (!free_slots_.empty() && Clock::now() < end_) {
      int slot = free_slots_.back();
      free_slots_.pop_back();
      writing_ = true;
      request_.set_id(absl::StrCat(slot));
      started_[slot] = Clock::now();
      // More requests to send right after this one: let gRPC hold it so
      // they leave in one send (never the first, which carries the
      // stream's initial metadata).
      bool more = !free_slots_.empty() && wrote_first_;
      wrote_first_ = true;
      return more ? Step::kWriteMore : Step::kWrite;
    }
    if (free_slots_.size() == started_.size()) {
      closed_ = true;
      return Step::kClose;
    }
    return Step::kNone;
  }

  void Act(Step step) {
    if (step == Step::kWrite) StartWrite(&request_);
    if (step == Step::kWriteMore) StartWrite(&request_, grpc::WriteOptions().set_buffer_hint());
    if (step == Step::kClose) StartWritesDone();
  }

  grpc::ClientContext ctx_;
  inference::ModelInferRequest request_;  // the one write outstanding
  inference::ModelStreamInferResponse response_;
  const int64_t rows_;
  const Clock::time_point measure_from_, end_;

  std::mutex mu_;
  std::condition_variable done_cv_;
  std::vector<Clock::time_point> started_;  // by slot, which the request id names
  std::vector<int> free_slots_;
  bool writing_ = false;
  bool closed_ = false;
  bool wrote_first_ = false;
  bool done_ = false;
  grpc::Status status_;
  BenchResult result_;
};

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
  absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> channels =
      MakeChannels(options.connection, options.channels);
  if (!channels.ok()) return BenchResult::Failed(channels.status());
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs;
  for (const auto& channel : *channels) stubs.push_back(inference::GRPCInferenceService::NewStub(channel));
  int64_t rows = 1;
  if (request.inputs_size() > 0 && request.inputs(0).shape_size() > 0) rows = request.inputs(0).shape(0);
  if (!stream) return RunUnary(options, request, rows, stubs);

  Clock::time_point measure_from =
      Clock::now() + std::chrono::microseconds(static_cast<int64_t>(options.warmup_s * 1e6));
  Clock::time_point end = measure_from + std::chrono::microseconds(static_cast<int64_t>(options.duration_s * 1e6));
  // The window is spread over one stream per channel.
  int streams = static_cast<int>(stubs.size());
  std::vector<std::unique_ptr<StreamDriver>> drivers;
  for (int s = 0; s < streams; ++s) {
    int window = options.concurrency / streams + (s < options.concurrency % streams ? 1 : 0);
    if (window == 0) continue;
    drivers.push_back(std::make_unique<StreamDriver>(options, request, rows, window, measure_from, end));
    drivers.back()->Start(*stubs[s]);
  }
  BenchResult result;
  for (auto& driver : drivers) result.Merge(driver->Finish());
  result.seconds = std::chrono::duration<double>(std::min(Clock::now(), end) - measure_from).count();
  return result;
}

}  // namespace infergate::tools
