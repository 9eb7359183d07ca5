// The hand-off ceiling: what gRPC 1.51's callback server reaches on this
// machine when each Infer call is handed to a worker thread and answered
// from there, with no model, no scheduling and no tensor work. It serves
// infergate.v1.InferenceService/Infer (any request: the reply is an mlp-sized
// answer, one 10-float output, a placement and timings) and the standard
// health service, on the same gRPC API and thread model as infergate.
//
// bench/run.sh drives it with the same pre-encoded frames as the server, so
// its rows say how much of the gRPC floor is left for a server that must
// pass each request from gRPC's threads to a device worker, before any
// serving work: the bound on the "Infer / gRPC floor" ratios.
//
//   handoff-ceiling [--address 127.0.0.1:0] [--workers 2]
//
// Prints "handoff-ceiling listening on ADDRESS" once serving; stops on
// SIGTERM or SIGINT. Threading: gRPC's threads run the handler, which only
// queues the call; `--workers` threads answer queued calls in order.

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

#include "common/flags.h"
#include "infergate/v1/inference.grpc.pb.h"

namespace {

using infergate::v1::InferRequest;
using infergate::v1::InferResponse;

// A queued call: the reply to fill and the reactor to finish.
struct PendingCall {
  const InferRequest* request;
  InferResponse* response;
  grpc::ServerUnaryReactor* reactor;
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
  // False once stopped and empty.
  bool Pop(PendingCall* call) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return stopped_ || !calls_.empty(); });
    if (calls_.empty()) return false;
    *call = calls_.front();
    calls_.pop_front();
    return true;
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
  call.reactor->Finish(grpc::Status::OK);
}

class HandoffService final : public infergate::v1::InferenceService::CallbackService {
 public:
  explicit HandoffService(CallQueue& queue) : queue_(queue) {}
  grpc::ServerUnaryReactor* Infer(grpc::CallbackServerContext* ctx, const InferRequest* request,
                                  InferResponse* response) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    queue_.Push({request, response, reactor});
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
  bool help = false;
  absl::StatusOr<std::vector<std::string>> positional = flags.Parse(argc, argv, &help);
  if (help) {
    std::cout << flags.Help();
    return 0;
  }
  if (!positional.ok() || !positional->empty() || workers < 1 || workers > 64) {
    std::cerr << "handoff-ceiling: "
              << (!positional.ok() ? std::string(positional.status().message())
                                   : "--workers must be 1..64 and no positional arguments are taken")
              << "\n" << flags.Help();
    return 2;
  }

  // Signals are waited for on one thread, so they are blocked before any
  // other thread starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  CallQueue queue;
  HandoffService service(queue);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::cerr << "handoff-ceiling: cannot listen on " << address << "\n";
    return 1;
  }
  std::vector<std::thread> threads;
  for (int64_t i = 0; i < workers; ++i) {
    threads.emplace_back([&queue] {
      PendingCall call;
      while (queue.Pop(&call)) Answer(call);
    });
  }
  std::cout << "handoff-ceiling listening on " << address.substr(0, address.rfind(':')) << ":" << port
            << std::endl;

  int signal = 0;
  sigwait(&stop_signals, &signal);
  // Workers keep answering while gRPC shuts down, so no call is left unfinished.
  server->Shutdown();
  queue.Stop();
  for (std::thread& t : threads) t.join();
  return 0;
}
