// Connection lifetimes, stream limits, idle floods and start-up.

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>

#include "inference/grpc_service.grpc.pb.h"
#include "tests/common/build_paths.h"
#include "tests/integration/server_fixture.h"

namespace infergate::testing {
namespace {

TEST(Connections, MaxConnectionAgeRecyclesWithoutFailingCalls) {
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--max-connection-age=500ms"});
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  auto stub = v1::InferenceService::NewStub(channel);
  v1::InferRequest req;
  req.set_model("mlp");
  *req.add_inputs() = ToWire(at::randn({1, 256}), "x");
  // Counts the channel leaving READY: each is a connection the server closed.
  std::atomic<int> reconnects{0};
  std::atomic<bool> watching{true};
  std::thread watcher([&] {
    grpc_connectivity_state last = channel->GetState(false);
    while (watching.load()) {
      if (channel->WaitForStateChange(last, std::chrono::system_clock::now() + std::chrono::milliseconds(100))) {
        grpc_connectivity_state now = channel->GetState(false);
        if (last == GRPC_CHANNEL_READY && now != GRPC_CHANNEL_READY) reconnects++;
        last = now;
      }
    }
  });
  int failed = 0, ok = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  while (std::chrono::steady_clock::now() < end) {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);  // ride through the reconnect after a GOAWAY
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::InferResponse resp;
    if (stub->Infer(&ctx, req, &resp).ok()) {
      ok++;
    } else {
      failed++;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  watching = false;
  watcher.join();
  EXPECT_EQ(failed, 0);
  EXPECT_GT(ok, 20);
  EXPECT_GE(reconnects.load(), 2) << "connections older than 500 ms were not recycled in 2.5 s";
  std::string out;
  std::string port = server->address().substr(server->address().rfind(':') + 1);
  EXPECT_EQ(
      RunCommand({InfergateCliBinary(), "--address", "dns:///localhost:" + port, "--lb", "round_robin", "devices"},
                 &out),
      0)
      << out;
  EXPECT_NE(out.find("cpu"), std::string::npos);
  stub.reset();
  channel.reset();
  EXPECT_EQ(server->Stop(), 0);
}

// With one stream per connection, 8 concurrent calls on one channel are
// serialised by HTTP/2 flow control, not refused: all succeed. And the
// limit holds: the server never holds two calls from one connection. With
// one CPU worker, of two one-second calls sent at once the second waits in
// the server's queue while the first runs, unless the client held it back
// until the first was answered; each call's queue_us says which happened,
// whatever the machine's speed (no sampling of a moving count).
TEST(Connections, ConcurrentStreamLimitQueuesCallsInTheClient) {
  auto server =
      ServerProcess::Start({"--model-repository=" + DemoRepository(), "--max-concurrent-streams=1", "--cpu-workers=1"});
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&] {
      auto stub = v1::InferenceService::NewStub(channel);
      v1::InferRequest req;
      req.set_model("mlp");
      *req.add_inputs() = ToWire(at::randn({1, 256}), "x");
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      v1::InferResponse resp;
      if (stub->Infer(&ctx, req, &resp).ok()) ok++;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 8);
  struct Waited {
    double longest_queue_s = 0;  // the call that waited longer in the server's queue
    double shortest_compute_s = 0;
  };
  auto two_slow_calls = [&](bool one_connection) {
    grpc::ChannelArguments separate;
    separate.SetInt("infergate.test.unique", one_connection ? 0 : 1);  // distinct arguments: its own connection
    std::vector<std::shared_ptr<grpc::Channel>> channels = {
        channel, one_connection
                     ? channel
                     : grpc::CreateCustomChannel(server->address(), grpc::InsecureChannelCredentials(), separate)};
    // Both connections up before either call starts: on a busy machine a
    // connection set up on demand can take longer than the first call.
    for (auto& ch : channels) {
      EXPECT_TRUE(ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(60)));
    }
    std::vector<std::thread> callers;
    std::vector<v1::Timing> timings(channels.size());
    std::atomic<int> slow_ok{0};
    for (size_t c = 0; c < channels.size(); ++c) {
      callers.emplace_back([&, c] {
        auto stub = v1::InferenceService::NewStub(channels[c]);
        v1::InferRequest req;
        req.set_model("slow");
        *req.add_inputs() = ToWire(at::ones({4}), "x");
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
        v1::InferResponse resp;
        if (stub->Infer(&ctx, req, &resp).ok()) {
          slow_ok++;
          timings[c] = resp.timing();
        }
      });
    }
    for (auto& t : callers) t.join();
    EXPECT_EQ(slow_ok.load(), 2);
    Waited w;
    w.shortest_compute_s = 1e9;
    for (const v1::Timing& t : timings) {
      w.longest_queue_s = std::max(w.longest_queue_s, t.queue_us() / 1e6);
      w.shortest_compute_s = std::min(w.shortest_compute_s, t.compute_us() / 1e6);
    }
    return w;
  };
  two_slow_calls(false);  // loads slow
  const Waited two = two_slow_calls(false);
  EXPECT_GT(two.longest_queue_s, two.shortest_compute_s / 2)
      << "two connections: the second call reaches the server and queues behind the first (queued "
      << two.longest_queue_s << " s, a call runs " << two.shortest_compute_s << " s)";
  const Waited one = two_slow_calls(true);
  EXPECT_LT(one.longest_queue_s, one.shortest_compute_s / 2)
      << "one connection: the second call waits in the client, not in the server's queue (queued "
      << one.longest_queue_s << " s, a call runs " << one.shortest_compute_s << " s)";
  channel.reset();
  EXPECT_EQ(server->Stop(), 0);
}

// A thread of a process, from /proc: its name and its scheduling policy.
struct ThreadSeen {
  std::string name;
  int policy = -1;  // SCHED_OTHER, SCHED_BATCH, ...; -1 if it could not be read
};

std::vector<ThreadSeen> ThreadsOf(pid_t pid) {
  std::vector<ThreadSeen> threads;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* tasks = opendir(dir.c_str());
  if (!tasks) return threads;
  while (dirent* e = readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(dir + "/" + e->d_name + "/comm");
    ThreadSeen seen;
    if (!std::getline(comm, seen.name)) continue;
    seen.policy = sched_getscheduler(static_cast<pid_t>(std::stol(e->d_name)));
    threads.push_back(seen);
  }
  closedir(tasks);
  return threads;
}

std::vector<std::string> ThreadNames(pid_t pid) {
  std::vector<std::string> names;
  for (const ThreadSeen& t : ThreadsOf(pid)) names.push_back(t.name);
  return names;
}

// Unary inference calls are taken off completion queues, with a fixed
// number of requests posted per queue (CompletionQueueServer): far more
// calls at once than are posted, of both unary RPCs over several
// connections, are each answered with their own row, by the one poller
// asked for. Each read holds room in the in-flight budget for the largest
// message the server takes until the message is in (intake_gate.h); with
// the default 64 MiB, 640 reads at once on a loaded sanitizer build could
// wait past the gate's 250 ms for room and be refused (an admission
// outcome this test is not about), so the server takes 1 MiB messages;
// and at most 512 small reads wait for a slot at once (IntakeGate::
// kMaxSlotWaiters), so the calls at once stay under that: 640 were once
// refused so on a loaded ASan run.
TEST(Connections, MoreUnaryCallsAtOnceThanArePostedAreEachAnsweredWithTheirOwnRow) {
  auto server =
      ServerProcess::Start({"--model-repository=" + DemoRepository(), "--devices=cpu", "--grpc-infer-threads=1",
                            "--max-concurrent-streams=1000", "--max-receive-bytes=1MiB"});
  ASSERT_NE(server, nullptr);
  constexpr int kCallsPerRpc = 3 * 64;  // far more than one queue has posted of each
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c < 4; ++c) {
    grpc::ChannelArguments separate;
    separate.SetInt("infergate.test.unique", c);  // distinct arguments: a connection each
    channels.push_back(grpc::CreateCustomChannel(server->address(), grpc::InsecureChannelCredentials(), separate));
    ASSERT_TRUE(channels.back()->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(60)));
  }
  // Row i of the batch is call i's input (v1) and call i's (ModelInfer).
  const at::Tensor inputs = at::randn({kCallsPerRpc, 256});
  const at::Tensor expected = Reference("mlp", {inputs});

  struct Call {
    grpc::ClientContext ctx;
    grpc::Status status;
    v1::InferResponse v1_response;
    inference::ModelInferResponse v2_response;
    std::unique_ptr<grpc::ClientAsyncResponseReader<v1::InferResponse>> v1_reader;
    std::unique_ptr<grpc::ClientAsyncResponseReader<inference::ModelInferResponse>> v2_reader;
  };
  std::vector<Call> calls(2 * kCallsPerRpc);
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<v1::InferenceService::Stub>> v1_stubs;
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> v2_stubs;
  for (auto& ch : channels) {
    v1_stubs.push_back(v1::InferenceService::NewStub(ch));
    v2_stubs.push_back(inference::GRPCInferenceService::NewStub(ch));
  }
  for (int i = 0; i < kCallsPerRpc; ++i) {
    const at::Tensor row = inputs.slice(0, i, i + 1).contiguous();
    Call& v1_call = calls[2 * i];
    v1_call.ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    v1::InferRequest v1_request;
    v1_request.set_model("mlp");
    *v1_request.add_inputs() = ToWire(row, "x");
    v1_call.v1_reader = v1_stubs[i % 4]->AsyncInfer(&v1_call.ctx, v1_request, &cq);
    v1_call.v1_reader->Finish(&v1_call.v1_response, &v1_call.status, &v1_call);
    Call& v2_call = calls[2 * i + 1];
    v2_call.ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    inference::ModelInferRequest v2_request = MlpV2Request();
    v2_request.set_raw_input_contents(0, std::string(static_cast<const char*>(row.data_ptr()), 256 * sizeof(float)));
    v2_call.v2_reader = v2_stubs[(i + 1) % 4]->AsyncModelInfer(&v2_call.ctx, v2_request, &cq);
    v2_call.v2_reader->Finish(&v2_call.v2_response, &v2_call.status, &v2_call);
  }
  for (size_t n = 0; n < calls.size(); ++n) {
    void* tag = nullptr;
    bool ok = false;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    ASSERT_TRUE(ok);
  }
  for (int i = 0; i < kCallsPerRpc; ++i) {
    const at::Tensor want = expected.slice(0, i, i + 1);
    const Call& v1_call = calls[2 * i];
    ASSERT_TRUE(v1_call.status.ok()) << "v1 call " << i << ": " << v1_call.status.error_message();
    ASSERT_EQ(v1_call.v1_response.outputs_size(), 1);
    EXPECT_TRUE(at::allclose(FromWire(v1_call.v1_response.outputs(0)), want, 1e-4, 1e-5)) << "v1 call " << i;
    const Call& v2_call = calls[2 * i + 1];
    ASSERT_TRUE(v2_call.status.ok()) << "ModelInfer call " << i << ": " << v2_call.status.error_message();
    ASSERT_EQ(v2_call.v2_response.raw_output_contents_size(), 1);
    const std::string& bytes = v2_call.v2_response.raw_output_contents(0);
    ASSERT_EQ(bytes.size(), 10 * sizeof(float));
    at::Tensor got = at::empty({1, 10});
    std::memcpy(got.data_ptr(), bytes.data(), bytes.size());
    EXPECT_TRUE(at::allclose(got, want, 1e-4, 1e-5)) << "ModelInfer call " << i;
  }
  const std::vector<std::string> names = ThreadNames(server->pid());
  EXPECT_EQ(std::count(names.begin(), names.end(), "grpc poller 0"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "grpc poller 1"), 0);
  v1_stubs.clear();
  v2_stubs.clear();
  channels.clear();
  EXPECT_EQ(server->Stop(), 0);
}

// The threads that move requests (gRPC's, the inference pollers, the HTTP
// server's) run under SCHED_BATCH, so waking for network work they do not
// preempt a device worker mid-batch; the device workers run under
// SCHED_OTHER. --io-thread-policy=normal leaves every thread normal. Both
// servers answer.
TEST(Connections, ThreadsThatMoveRequestsDoNotPreemptDeviceWorkers) {
  for (const std::string policy : {"batch", "normal"}) {
    SCOPED_TRACE("--io-thread-policy=" + policy);
    auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--devices=cpu", "--cpu-workers=2",
                                        "--http-address=127.0.0.1:0", "--io-thread-policy=" + policy});
    ASSERT_NE(server, nullptr);
    auto stub =
        v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::InferRequest request;
    request.set_model("mlp");
    *request.add_inputs() = ToWire(at::randn({1, 256}), "x");
    v1::InferResponse response;
    ASSERT_TRUE(stub->Infer(&ctx, request, &response).ok());

    const int io_policy = policy == "batch" ? SCHED_BATCH : SCHED_OTHER;
    int workers = 0;
    int pollers = 0;
    int http = 0;
    for (const ThreadSeen& t : ThreadsOf(server->pid())) {
      if (t.name.rfind("cpu worker ", 0) == 0) {
        ++workers;
        EXPECT_EQ(t.policy, SCHED_OTHER) << t.name;
      } else if (t.name.rfind("grpc poller ", 0) == 0) {
        ++pollers;
        EXPECT_EQ(t.policy, io_policy) << t.name;
      } else if (t.name.rfind("http ", 0) == 0) {
        ++http;
        EXPECT_EQ(t.policy, io_policy) << t.name;
      } else if (t.name == "nexting_thread" || t.name == "default-executo") {
        EXPECT_EQ(t.policy, io_policy) << t.name << " (gRPC's own)";
      }
    }
    EXPECT_EQ(workers, 2);
    EXPECT_EQ(pollers, 2);
    EXPECT_GE(http, 1);
    stub.reset();
    EXPECT_EQ(server->Stop(), 0);
  }
  std::string out;
  EXPECT_EQ(RunCommand({"/bin/sh", "-c",
                        std::string(InfergateBinary()) + " --address=127.0.0.1:0 --model-repository='" +
                            DemoRepository() + "' --io-thread-policy=fifo 2>&1"},
                       &out),
            2);
  EXPECT_NE(out.find("--io-thread-policy: 'fifo'"), std::string::npos) << out;
}

// A loopback TCP connection to `address` (HOST:PORT) that sends `first`
// and then nothing; -1 if it could not connect.
int SilentSocket(const std::string& address, const std::string& first = "") {
  const std::string port = address.substr(address.rfind(':') + 1);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(port)));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  if (!first.empty()) (void)!send(fd, first.data(), first.size(), MSG_NOSIGNAL);
  return fd;
}

// Whether the server has closed `fd` (end of stream or reset), waiting up
// to `timeout`; bytes the server sends first (its HTTP/2 settings, a
// GOAWAY) are read and dropped.
bool ClosedByServer(int fd, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  char buf[1024];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
  return false;
}

// An idle flood: hundreds of sockets opened and left silent (or stopped
// after part of the HTTP/2 preface). A well-behaved client is answered
// the whole time within ten times its slowest call before the flood (at
// least 500 ms: under the 1 s handshake timeout, which a call held behind
// the silent sockets would wait for), and the server closes every silent
// socket once --grpc-handshake-timeout passes, so they cannot pile up.
TEST(Connections, SilentSocketsAreClosedAndOthersKeepBeingServed) {
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--grpc-handshake-timeout=1s"});
  ASSERT_NE(server, nullptr);
  auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  v1::InferRequest req;
  req.set_model("mlp");
  *req.add_inputs() = ToWire(at::randn({1, 256}), "x");
  auto call_takes = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::InferResponse resp;
    auto start = std::chrono::steady_clock::now();
    grpc::Status s = stub->Infer(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return std::chrono::steady_clock::now() - start;
  };
  call_takes();  // the model is loaded and the client connected
  std::chrono::steady_clock::duration slowest_before{0};
  for (int i = 0; i < 20; ++i) slowest_before = std::max(slowest_before, call_takes());
  const auto bound = std::max<std::chrono::steady_clock::duration>(10 * slowest_before, std::chrono::milliseconds(500));
  std::cout << "slowest call before the flood: "
            << std::chrono::duration_cast<std::chrono::microseconds>(slowest_before).count() << " us\n";
  std::vector<int> silent;
  for (int i = 0; i < 300; ++i) {
    int fd = SilentSocket(server->address(), i % 3 == 0 ? "PRI * HTTP/2.0\r\n" : "");
    ASSERT_GE(fd, 0) << "connection " << i;
    silent.push_back(fd);
  }
  for (int i = 0; i < 20; ++i) EXPECT_LT(call_takes(), bound) << "call " << i << " during the flood";
  // Generous: the timeout is 1 s; a loaded machine under a sanitizer is slow.
  int closed = 0;
  for (int fd : silent) closed += ClosedByServer(fd, std::chrono::milliseconds(60000)) ? 1 : 0;
  EXPECT_EQ(closed, static_cast<int>(silent.size())) << "silent sockets the server kept";
  for (int fd : silent) close(fd);
  EXPECT_LT(call_takes(), bound);
  EXPECT_EQ(server->Stop(), 0);
}

// A client connection with no call open for --max-connection-idle is
// closed by the server (GOAWAY); the client reconnects when it next calls.
TEST(Connections, IdleConnectionsAreClosedAndClientsReconnect) {
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--max-connection-idle=500ms"});
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  auto stub = v1::InferenceService::NewStub(channel);
  auto list = [&] {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::ListDevicesResponse resp;
    return stub->ListDevices(&ctx, v1::ListDevicesRequest(), &resp).ok();
  };
  ASSERT_TRUE(list());
  ASSERT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  bool left_ready = false;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       !left_ready && std::chrono::steady_clock::now() < end;) {
    left_ready = channel->WaitForStateChange(GRPC_CHANNEL_READY,
                                             std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(left_ready) << "the idle connection was never closed";
  EXPECT_TRUE(list()) << "the client did not reconnect";
  EXPECT_EQ(server->Stop(), 0);
}

TEST(ServerStartup, FlagsComeFromTheEnvironmentToo) {
  std::string out;
  EXPECT_EQ(RunCommand({"/usr/bin/env", "INFERGATE_DRAIN_TIMEOUT=forever", InfergateBinary(), "--address=127.0.0.1:0",
                        "--model-repository=" + DemoRepository()},
                       &out),
            2);
}

TEST(ServerStartup, HelpListsFlagsAndMissingRepositoryFails) {
  std::string out;
  EXPECT_EQ(RunCommand({InfergateBinary(), "--help"}, &out), 0);
  EXPECT_NE(out.find("--model-repository"), std::string::npos);
  EXPECT_NE(out.find("--max-receive-bytes"), std::string::npos);
  out.clear();
  EXPECT_NE(RunCommand({InfergateBinary(), "--address=127.0.0.1:0", "--model-repository=/nonexistent/ig"}, &out), 0);
  out.clear();
  EXPECT_EQ(RunCommand({InfergateBinary(), "--bogus-flag"}, &out), 2);
}

}  // namespace
}  // namespace infergate::testing
