// The hand-off ceiling: what gRPC 1.51 reaches on this machine when each
// Infer call is handed to a worker thread and answered from there, with no
// model, no scheduling and no tensor work (or, with --model, with only the
// model's forward pass: see below). It serves
// infergate.v1.InferenceService/Infer (any request: the reply is an mlp-sized
// answer, one 10-float output, a placement and timings) and the standard
// health service, on one of gRPC's two server APIs:
//
//   --api=callback  the callback API, infergate's thread model: gRPC's
//                   threads run the handler, which only queues the call;
//                   a worker answers it and finishes the reactor.
//   --api=cq        the completion-queue (async) API, Triton's: `--pollers`
//                   threads each poll their own completion queue, keep
//                   requests posted on it and queue each call that arrives;
//                   a worker answers it and finishes it itself, and the
//                   poller that sees the finish frees it.
//
// bench/run.sh drives both with the same pre-encoded frames as the server,
// so their rows say how much of the gRPC floor is left for a server that
// must pass each request from gRPC's threads to a device worker, before any
// serving work (the bound on the "Infer / gRPC floor" ratios), and which
// API leaves more.
//
// With `--model PATH --row-shape 256`, each worker takes every queued call
// (up to --max-batch) and runs the TorchScript model once on that many
// generated rows before answering them (tools/ceiling_model.h): the least a
// server must do to answer with that model, beside which infergate's own
// serving work is measured.
//
//   handoff-ceiling [--address 127.0.0.1:0] [--workers 2] [--api callback|cq] [--pollers 2]
//                   [--io-thread-policy batch|normal] [--model PATH --row-shape 256 [--max-batch 64]]
//
// Prints "handoff-ceiling listening on ADDRESS" once serving; stops on
// SIGTERM or SIGINT, and with a model then prints the batches it ran: their
// mean size, and the mean size of a call's batch (to set beside the
// server's infergate_batch_size histogram, which counts per request).
// Threading: as above; `--workers` threads answer queued calls in order
// (with a model, in batches of all those queued).

#include <ATen/Parallel.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>

#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/cpu_policy.h"
#include "common/flags.h"
#include "devices/system_info.h"
#include "infergate/v1/inference.grpc.pb.h"
#include "tools/ceiling_model.h"

namespace {

using infergate::v1::InferRequest;
using infergate::v1::InferResponse;

// A call on the completion-queue API: its state lives here from the
// posted request to the finish, and its pointer is its tag.
struct CqCall {
  grpc::ServerContext ctx;
  InferRequest request;
  InferResponse response;
  grpc::ServerAsyncResponseWriter<InferResponse> responder{&ctx};
  bool finishing = false;  // set when it is queued: its next event is its finish
};

// A queued call: the reply to fill and how to finish it (a callback
// reactor, or a completion-queue call).
struct PendingCall {
  const InferRequest* request;
  InferResponse* response;
  grpc::ServerUnaryReactor* reactor;  // null for a completion-queue call
  CqCall* cq_call;
};

// Calls waiting for a worker; workers sleep on a condition variable, as the
// server's device workers do (one futex wake-up per call that finds them
// asleep).
class CallQueue {
 public:
  void Push(PendingCall call) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back(call);
    }
    cv_.notify_one();
  }
  // Every queued call up to `max` (at least one); false once stopped and
  // empty.
  bool PopUpTo(size_t max, std::vector<PendingCall>* calls) {
    calls->clear();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return stopped_ || !calls_.empty(); });
    while (!calls_.empty() && calls->size() < max) {
      calls->push_back(calls_.front());
      calls_.pop_front();
    }
    return !calls->empty();
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PendingCall> calls_;
  bool stopped_ = false;
};

// Fills an answer the size of the demo mlp's (10 floats, a placement, timings).
void Answer(const PendingCall& call) {
  infergate::v1::Tensor* out = call.response->add_outputs();
  out->set_name("logits");
  out->set_dtype(infergate::v1::FLOAT32);
  out->add_shape(1);
  out->add_shape(10);
  out->set_data(std::string(10 * sizeof(float), '\0'));
  infergate::v1::Placement* placement = call.response->mutable_placement();
  placement->set_device("cpu");
  placement->set_requested_device("auto");
  placement->set_dtype(infergate::v1::FLOAT32);
  placement->set_batch_size(1);
  placement->set_model_version(1);
  call.response->mutable_timing()->set_total_us(1);
  call.response->set_request_id(call.request->request_id());
  if (call.reactor) {
    call.reactor->Finish(grpc::Status::OK);
  } else {
    call.cq_call->responder.Finish(*call.response, grpc::Status::OK, call.cq_call);
  }
}

// One poller of the completion-queue API: keeps `posted` requests waiting
// on its queue, queues each call that arrives, frees each finished one.
void PollCompletionQueue(infergate::v1::InferenceService::AsyncService& service, grpc::ServerCompletionQueue* cq,
                         CallQueue& queue, int posted) {
  auto post = [&] {
    auto* call = new CqCall();
    service.RequestInfer(&call->ctx, &call->request, &call->responder, cq, cq, call);
  };
  for (int i = 0; i < posted; ++i) post();
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) {
    auto* call = static_cast<CqCall*>(tag);
    if (call->finishing || !ok) {  // finished, or a posted request the shutdown ended
      delete call;
      continue;
    }
    post();
    call->finishing = true;
    queue.Push({&call->request, &call->response, nullptr, call});
  }
}

class HandoffService final : public infergate::v1::InferenceService::CallbackService {
 public:
  explicit HandoffService(CallQueue& queue) : queue_(queue) {}
  grpc::ServerUnaryReactor* Infer(grpc::CallbackServerContext* ctx, const InferRequest* request,
                                  InferResponse* response) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    queue_.Push({request, response, reactor, nullptr});
    return reactor;
  }

 private:
  CallQueue& queue_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string address = "127.0.0.1:0";
  int64_t workers = 2;
  infergate::FlagSet flags(
      "handoff-ceiling: a gRPC server that answers Infer from a worker thread with no model; the bound "
      "bench/run.sh sets beside infergate.\nUsage: handoff-ceiling [flags]");
  flags.String("address", &address, "host:port to listen on (port 0: any free port).");
  flags.Int("workers", &workers, "Worker threads answering calls.");
  std::string api = "callback";
  int64_t pollers = 2;
  flags.String("api", &api, "gRPC's server API: callback (infergate's) or cq (completion queues).");
  flags.Int("pollers", &pollers, "With --api=cq: threads polling a completion queue each.");
  std::string io_thread_policy = "batch";
  flags.String("io-thread-policy", &io_thread_policy,
               "CPU policy of every thread but the workers, as infergate's flag of that name: batch or normal.");
  std::string model_path;
  std::string row_shape_text = "256";
  int64_t max_batch = 64;
  flags.String("model", &model_path,
               "A TorchScript model each worker runs once per batch of the calls it takes; none by default.");
  flags.String("row-shape", &row_shape_text,
               "With --model: the shape of one row of its input, such as 256 or 3x64x64.");
  flags.Int("max-batch", &max_batch, "With --model: the most calls a worker takes at once.");
  bool help = false;
  absl::StatusOr<std::vector<std::string>> positional = flags.Parse(argc, argv, &help);
  if (help) {
    std::cout << flags.Help();
    return 0;
  }
  std::vector<int64_t> row_shape;
  for (absl::string_view d : absl::StrSplit(row_shape_text, 'x')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(d, &v) || v < 1) {
      std::cerr << "handoff-ceiling: --row-shape: '" << row_shape_text << "' is not a shape such as 256 or 3x64x64\n";
      return 2;
    }
    row_shape.push_back(v);
  }
  if (max_batch < 1 || max_batch > 1024) {
    std::cerr << "handoff-ceiling: --max-batch: must be 1..1024\n";
    return 2;
  }
  std::unique_ptr<infergate::CeilingModel> model;
  if (!model_path.empty()) {
    // One thread per worker, as the server sizes a worker per core.
    at::set_num_threads(1);
    infergate::SetBlasThreads(1);
    absl::StatusOr<std::unique_ptr<infergate::CeilingModel>> loaded =
        infergate::CeilingModel::Load(model_path, row_shape, max_batch);
    if (!loaded.ok()) {
      std::cerr << "handoff-ceiling: --model: " << loaded.status().message() << "\n";
      return 1;
    }
    model = *std::move(loaded);
  }
  absl::StatusOr<infergate::CpuPolicy> policy = infergate::ParseCpuPolicy(io_thread_policy);
  if (!positional.ok() || !positional->empty() || workers < 1 || workers > 64 || pollers < 1 || pollers > 64 ||
      (api != "callback" && api != "cq") || !policy.ok()) {
    std::cerr << "handoff-ceiling: "
              << (!positional.ok() ? std::string(positional.status().message())
                                   : "--workers and --pollers must be 1..64, --api callback or cq, "
                                     "--io-thread-policy batch or normal, and no positional arguments are taken")
              << "\n"
              << flags.Help();
    return 2;
  }
  const bool completion_queues = api == "cq";

  // Signals are waited for on one thread, so they are blocked before any
  // other thread starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // The threads infergate runs under --io-thread-policy inherit it from
  // here; the workers set the normal policy, as infergate's device workers.
  if (absl::Status s = infergate::SetThisThreadCpuPolicy(*policy); !s.ok()) {
    std::cerr << "handoff-ceiling: " << s.message() << "\n";
    return 1;
  }

  CallQueue queue;
  HandoffService callback_service(queue);
  infergate::v1::InferenceService::AsyncService async_service;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs;
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  if (completion_queues) {
    builder.RegisterService(&async_service);
    for (int64_t i = 0; i < pollers; ++i) cqs.push_back(builder.AddCompletionQueue());
  } else {
    builder.RegisterService(&callback_service);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::cerr << "handoff-ceiling: cannot listen on " << address << "\n";
    return 1;
  }
  std::vector<std::thread> threads;
  // Per worker: batches run and calls answered, each written by its worker
  // only and read after it is joined.
  struct WorkerTally {
    uint64_t batches = 0;
    uint64_t calls = 0;
    uint64_t call_batch_rows = 0;  // per call, the rows of its batch: sum of squares of batch sizes
  };
  std::vector<WorkerTally> tallies(static_cast<size_t>(workers));
  for (int64_t i = 0; i < workers; ++i) {
    threads.emplace_back([&queue, &model, &tally = tallies[static_cast<size_t>(i)]] {
      infergate::SetThisThreadCpuPolicy(infergate::CpuPolicy::kNormal).IgnoreError();  // main set a policy already
      // Without a model a worker answers one call at a time.
      const size_t take = model ? static_cast<size_t>(model->max_batch()) : 1;
      std::vector<PendingCall> calls;
      while (queue.PopUpTo(take, &calls)) {
        if (model) model->Run(static_cast<int64_t>(calls.size()));
        for (const PendingCall& call : calls) Answer(call);
        ++tally.batches;
        tally.calls += calls.size();
        tally.call_batch_rows += calls.size() * calls.size();
      }
    });
  }
  std::vector<std::thread> poller_threads;
  for (auto& cq : cqs) {
    // Enough posted requests per queue for the bench's 64 streams to find
    // one waiting.
    poller_threads.emplace_back(PollCompletionQueue, std::ref(async_service), cq.get(), std::ref(queue), 64);
  }
  std::cout << "handoff-ceiling listening on " << address.substr(0, address.rfind(':')) << ":" << port << std::endl;

  int signal = 0;
  sigwait(&stop_signals, &signal);
  // Workers keep answering while gRPC shuts down, so no call is left unfinished.
  server->Shutdown();
  queue.Stop();
  for (std::thread& t : threads) t.join();
  if (model) {
    WorkerTally all;
    for (const WorkerTally& t : tallies) {
      all.batches += t.batches;
      all.calls += t.calls;
      all.call_batch_rows += t.call_batch_rows;
    }
    std::cout << "handoff-ceiling ran " << all.batches << " batches for " << all.calls << " calls (mean batch "
              << (all.batches ? static_cast<double>(all.calls) / static_cast<double>(all.batches) : 0.0)
              << "; a call's batch, mean "
              << (all.calls ? static_cast<double>(all.call_batch_rows) / static_cast<double>(all.calls) : 0.0) << ")"
              << std::endl;
  }
  for (auto& cq : cqs) cq->Shutdown();  // the pollers free what is left and end
  for (std::thread& t : poller_threads) t.join();
  return 0;
}
