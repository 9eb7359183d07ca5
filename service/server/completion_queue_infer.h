#pragma once
// The inference RPCs on gRPC's completion-queue (async) API: infergate.v1
// `Infer`, the Open Inference Protocol's `ModelInfer` and
// `ModelStreamInfer`, and TorchServe's `Predictions`; every other RPC stays
// on the callback API. These
// carry the load, and this is how Triton takes them: a few threads each
// polling a queue, the answer written by the worker that computed it, and a
// thread count the operator sets. Against the callback API it measured no
// slower in alternating runs (bench/results/README.md).
//
// A few poller threads each own a completion queue, keep `kPostedPerMethod`
// requests of each RPC posted on it (reposting one as each call arrives),
// and run each call that arrives through the one inference call path
// (infer_call.h): token, drain switch, budget, decode, submit. The unary
// RPCs are taken as gRPC generic calls, so that their request message is
// read only when the intake gate (intake_gate.h) finds room for it in the
// in-flight budget: gRPC reads a registered unary method's whole message
// before the server sees the call, which no admission after it can bound.
// A stream's messages pass the same gate, one read at a time. The device
// worker that answers a unary call finishes it (writes the answer) itself;
// the poller that later sees the finish frees it. A stream (an InferStream,
// open_inference_stream.h) reads and submits its requests on its poller and
// writes each answer from the thread that made it ready. A call is freed
// once both its finish and gRPC's "done" notice (which also tells of a
// client that cancelled, or a deadline that passed: the call's requests are
// then cancelled) have come back.
//
//   CompletionQueueInfer infer(builder, threads, front_end, v1, oi);
//   server = builder.BuildAndStart();
//   infer.Start();
//   ... server->Shutdown(); every call answered (the core stopped);
//   infer.Stop();
//
// Threading: each call's events come back on the queue its request was
// posted on, so one poller handles all of a call's events in order and its
// bookkeeping needs no lock; a worker only starts a finish or a write.
// Ownership: the services and the front end are not owned and must outlive
// this; calls own themselves between posting and freeing.

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace infergate {

class FrontEnd;
class InferenceServiceImpl;
class OpenInferenceService;
class TorchServeGrpcService;

class CompletionQueueInfer {
 public:
  // Requests of each RPC kept posted on each queue (for a stream: streams
  // opening). gRPC hands a call to the first queue, from its connection's
  // on, with a request posted, so with many posted one connection's calls
  // all go to one poller. With few, a busy poller's run out and the next
  // calls go to another's; calls beyond those posted wait in gRPC until a
  // poller posts again.
  static constexpr int kPostedPerMethod = 4;
  // Calls waiting in line for room in the in-flight budget before their
  // message is read (intake_gate.h), at most; past it a unary call is
  // refused at once.
  static constexpr size_t kMaxWaitingReads = 4096;

  // Adds `threads` completion queues to `builder`; before it builds the
  // server. The services must be registered with the same builder.
  // The budget's room for one read is `max_message_bytes` (the server's
  // --max-receive-bytes). Registers the server's generic service: Infer,
  // ModelInfer and TorchServe's Predictions come as generic calls (their
  // services mark them so).
  CompletionQueueInfer(grpc::ServerBuilder& builder, int threads, const FrontEnd& front_end,
                       InferenceServiceImpl& v1_service, OpenInferenceService& open_inference,
                       const TorchServeGrpcService& torchserve, uint64_t max_message_bytes);
  // Stops unless Stop was called (after a server that failed to start, too).
  ~CompletionQueueInfer();
  CompletionQueueInfer(const CompletionQueueInfer&) = delete;
  CompletionQueueInfer& operator=(const CompletionQueueInfer&) = delete;

  // Posts the requests and starts the pollers; once the server is built
  // and started.
  void Start();
  // Once the server has shut down and no call is still to be answered (a
  // call finished after this would find its queue gone): shuts the queues
  // down, frees what they still hold, and joins the pollers.
  void Stop();

  // Used by the calls (completion_queue_infer.cc).
  struct Context;

 private:
  std::unique_ptr<Context> context_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::thread> pollers_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace infergate
