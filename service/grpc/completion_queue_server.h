#pragma once
// Every RPC of the server's gRPC port, on gRPC's completion-queue (async)
// API: the inference RPCs the front ends register (grpc_infer_calls.h:
// infergate.v1 `Infer`, the Open Inference Protocol's `ModelInfer` and
// `ModelStreamInfer`, TorchServe's `Predictions`) and every other method
// (grpc_method.h: health, metadata, listings, loads, reflection). It knows
// none of their message types: each front end registers its calls from its
// own folder. This is how Triton takes its calls: a few
// threads each polling a queue, the answer written by the worker that
// computed it, and a thread count the operator sets. Against the callback
// API it measured no slower in alternating runs (bench/results/README.md).
//
// Nothing is read before it is allowed and paid for. Every method but the
// inference stream is taken as a gRPC generic call, whose message gRPC
// reads only when asked (a registered method's whole message is read and
// parsed before the server sees the call, which no admission after it can
// bound). So for each call: its method is looked up (unknown:
// UNIMPLEMENTED, unread); the caller's token (where the method needs one)
// and, for inference, the drain switch are checked from its metadata
// (refused unread); its message is read only when the intake gate
// (intake_gate.h) has room for it in the in-flight budget, and within the
// gate's deadline; it is scanned on the wire (wire_scan.h), refused over
// its method's limits, and charged at what parsing it will hold before it
// is parsed. A stream's messages pass the same gate and scan, one read at
// a time. The device worker that answers a unary inference call finishes
// it (writes the answer) itself; the poller that later sees the finish
// frees it. A stream (its front end's InferStreamSession) reads and
// submits its requests on its poller and writes each answer from the
// thread that made it ready. A call is freed once every operation it
// started has come back, its finish and gRPC's "done" notice (which also
// tells of a client that cancelled, or a deadline that passed: the call's
// requests are then cancelled) included.
//
//   CompletionQueueServer infer(builder, threads, environment, methods, infer_calls, intake);
//   server = builder.BuildAndStart();
//   infer.Start();
//   ... server->Shutdown(); every call answered (the core stopped);
//   infer.Stop();
//
// Threading: each call's events come back on the queue its request was
// posted on, so one poller handles all of a call's events in order and its
// bookkeeping needs no lock; a worker (or a loader) only starts a finish
// or a write.
// Ownership: the two tables and the call environment are not owned and
// must outlive this; calls own themselves between posting and
// freeing.

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace infergate {

class CallEnvironment;
class GrpcInferCalls;
class GrpcMethods;

class CompletionQueueServer {
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

  // How requests are read (intake_gate.h).
  struct IntakeOptions {
    // The largest message (--max-receive-bytes).
    uint64_t max_message_bytes = 64 << 20;
    // The slowest a large message may come, after a grace of 5 s
    // (--min-receive-rate).
    uint64_t min_receive_rate = 1 << 20;
    // Reads of one address at once (--max-reads-per-address).
    int max_reads_per_address = 64;
  };

  // Adds `threads` completion queues to `builder`; before it builds the
  // server. Registers the server's generic service: every method but the
  // inference stream comes as a generic call, the unary inference RPCs of
  // `infer_calls` to the inference call path, the others to `methods`
  // (grpc_method.h). The stream method's service must be registered with
  // the same builder.
  CompletionQueueServer(grpc::ServerBuilder& builder, int threads, const CallEnvironment& environment,
                        const GrpcMethods& methods, const GrpcInferCalls& infer_calls, const IntakeOptions& intake);
  // Stops unless Stop was called (after a server that failed to start, too).
  ~CompletionQueueServer();
  CompletionQueueServer(const CompletionQueueServer&) = delete;
  CompletionQueueServer& operator=(const CompletionQueueServer&) = delete;

  // Posts the requests and starts the pollers; once the server is built
  // and started.
  void Start();
  // Once the server has shut down and no call is still to be answered (a
  // call finished after this would find its queue gone): shuts the queues
  // down, frees what they still hold, and joins the pollers.
  void Stop();

  // Used by the calls (completion_queue_server.cc).
  struct Context;

 private:
  std::unique_ptr<Context> context_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::thread> pollers_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace infergate
