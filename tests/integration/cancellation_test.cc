// Clients that cancel while their requests wait in a queue, or stop reading
// their stream's answers: the server keeps answering everyone else, holds
// bounded memory, returns the requests' budget and exits cleanly.

#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "inference/grpc_service.grpc.pb.h"
#include "tests/integration/server_fixture.h"

namespace infergate::testing {
namespace {

// A v1 request for `slow` with `elements` values of x.
v1::InferRequest SlowV1Request(int64_t elements = 4) {
  v1::InferRequest req;
  req.set_model("slow");
  *req.add_inputs() = ToWire(at::ones({elements}), "x");
  return req;
}

// A typed (not raw) request for `slow`: decoding a large one copies every
// value, which widens the moment between the server reading it and
// queueing it.
inference::ModelInferRequest TypedSlowRequest(int64_t elements) {
  inference::ModelInferRequest req;
  req.set_model_name("slow");
  auto* in = req.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(elements);
  auto* values = in->mutable_contents()->mutable_fp32_contents();
  values->Reserve(static_cast<int>(elements));
  for (int64_t i = 0; i < elements; ++i) values->Add(1.0f);
  return req;
}

// Two clients that keep `slow` busy on the server's one CPU worker, so
// that every other request for it waits in the queue.
class BusySlowClients {
 public:
  explicit BusySlowClients(v1::InferenceService::Stub& stub) {
    for (int i = 0; i < 2; ++i) {
      threads_.emplace_back([this, &stub] {
        while (!stop_.load()) {
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
          v1::InferResponse resp;
          stub.Infer(&ctx, SlowV1Request(), &resp);
        }
      });
    }
  }
  ~BusySlowClients() { Stop(); }
  // Lets each client's call in flight end (about a second of work), then joins.
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// After clients cancelled queued requests: health answers on a new
// connection and a new request is served (behind the busy clients' last
// calls).
void ExpectStillServing(const ServerProcess& server, inference::GRPCInferenceService::Stub& v2_stub) {
  using Health = grpc::health::v1::HealthCheckResponse;
  EXPECT_EQ(HealthStatus(server.address(), "", std::chrono::seconds(30)), Health::SERVING) << server.Log();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  inference::ModelInferResponse resp;
  grpc::Status s = v2_stub.ModelInfer(&ctx, MlpV2Request(), &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// Every cancelled request's share of the in-flight budget comes back.
void ExpectBudgetReturned(const ServerProcess& server) {
  bool budget_returned = false;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !budget_returned && std::chrono::steady_clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    budget_returned = MetricValue(ScrapeMetrics(server), "infergate_inflight_request_bytes") == 0;
  }
  EXPECT_TRUE(budget_returned) << "the in-flight budget was not returned";
}

// A server with one CPU worker, held by two clients calling `slow`, and
// stubs of both protocols on one channel.
class Cancellation : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--devices=cpu", "--cpu-workers=1",
                                    "--drain-timeout=30s", "--max-inflight-bytes=1GiB"});
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    v1_stub_ = v1::InferenceService::NewStub(channel_);
    v2_stub_ = inference::GRPCInferenceService::NewStub(channel_);
    busy_ = std::make_unique<BusySlowClients>(*v1_stub_);
    ASSERT_TRUE(WaitForDevice(*v1_stub_, [](const v1::DeviceInfo& d) { return d.in_flight() > 0; }))
        << "the busy clients never got the worker";
  }
  void TearDown() override {
    if (busy_) busy_->Stop();
  }

  // After the clients cancelled: the server still serves, the busy clients
  // end, and every request's budget comes back.
  void ExpectServingAndBudgetReturned() {
    ExpectStillServing(*server_, *v2_stub_);
    busy_->Stop();
    ExpectBudgetReturned(*server_);
  }
  // SIGTERM with nothing left to do ends the process cleanly, well inside
  // the 30 s drain timeout.
  void ExpectCleanStop() {
    v1_stub_.reset();
    v2_stub_.reset();
    channel_.reset();
    EXPECT_EQ(server_->Stop(), 0) << server_->Log();
  }

  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::InferenceService::Stub> v1_stub_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> v2_stub_;
  std::unique_ptr<BusySlowClients> busy_;
};

// The reliability probe's shape: two clients keep `slow` busy on one CPU
// worker while 40 streams each send a large request and cancel it 0-80 ms
// later. Cancelling a stream whose request was being queued used to answer
// that request inside the stream's own lock, wedging gRPC's threads: health
// timed out, the budget was never returned and SIGTERM never finished.
TEST_F(Cancellation, StreamsCancelledWhileTheirRequestsQueueLeaveTheServerServing) {
  const inference::ModelInferRequest large = TypedSlowRequest(1 << 20);  // 4 MiB of FP32, typed
  std::vector<std::thread> cancellers;
  for (int i = 0; i < 40; ++i) {
    cancellers.emplace_back([&, i] {
      std::mt19937 rng(i);
      grpc::ClientContext ctx;
      auto stream = v2_stub_->ModelStreamInfer(&ctx);
      stream->Write(large);
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 80)(rng)));
      ctx.TryCancel();
      inference::ModelStreamInferResponse ignored;
      while (stream->Read(&ignored)) {
      }
      stream->Finish();
    });
  }
  for (auto& t : cancellers) t.join();

  ExpectServingAndBudgetReturned();
  ExpectCleanStop();
}

// The same for unary calls, v1 Infer and Open Inference ModelInfer in
// turn: each sends a large request for busy `slow` and cancels it 0-200 ms
// later, while it is read, queued or (rarely) running; every fourth sends
// a small one and cancels it 200-400 ms later, when it has been read and
// waits in the queue (40 large reads at once under ASan on a busy machine
// once left none queued by their cancels; `slow` runs about a second, so
// no call is answered before its cancel either way). The unary reactor
// cancels on the thread that sees the cancellation and frees the call on
// the thread that finishes it, so a cancelled call answers its queued
// request there. None may wedge the server, keep budget or fail the
// calls that were not cancelled.
TEST_F(Cancellation, UnaryCallsCancelledWhileTheirRequestsQueueLeaveTheServerServing) {
  const inference::ModelInferRequest large_v2 = TypedSlowRequest(1 << 20);  // 4 MiB of FP32, typed
  const v1::InferRequest large_v1 = SlowV1Request(1 << 20);
  const inference::ModelInferRequest small_v2 = TypedSlowRequest(1024);
  const v1::InferRequest small_v1 = SlowV1Request(1024);
  std::atomic<int> cancelled{0}, overdue{0};
  std::string other_statuses;
  std::mutex other_mu;
  std::vector<std::thread> cancellers;
  for (int i = 0; i < 40; ++i) {
    cancellers.emplace_back([&, i] {
      std::mt19937 rng(i);
      grpc::ClientContext ctx;
      const bool small = i % 4 == 3;
      const auto cancel_after =
          std::chrono::milliseconds(std::uniform_int_distribution<int>(small ? 200 : 0, small ? 400 : 200)(rng));
      std::thread canceller([&ctx, cancel_after] {
        std::this_thread::sleep_for(cancel_after);
        ctx.TryCancel();
      });
      grpc::Status s;
      if (i % 2 == 0) {
        v1::InferResponse resp;
        s = v1_stub_->Infer(&ctx, small ? small_v1 : large_v1, &resp);
      } else {
        inference::ModelInferResponse resp;
        s = v2_stub_->ModelInfer(&ctx, small ? small_v2 : large_v2, &resp);
      }
      canceller.join();
      if (s.error_code() == grpc::StatusCode::CANCELLED) {
        cancelled++;
      } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
                 s.error_message().find("did not arrive") != std::string::npos) {
        // Refused cleanly as overdue before the server saw the cancel: in
        // the ASan suite, beside another test on both cores, 4 of 40 such
        // 4 MiB reads once sat past their 9 s deadline with the client's
        // cancel (at most 200 ms in) not yet seen by the server. The same
        // unexplained loopback stall as BurstBudgetTest's (faults_test.cc).
        overdue++;
      } else {
        std::lock_guard<std::mutex> lock(other_mu);
        other_statuses += " " + std::to_string(s.error_code()) + ":" + s.error_message();
      }
    });
  }
  for (auto& t : cancellers) t.join();
  // The worker is held by calls of about a second and each cancel comes
  // within 400 ms: no call can have been answered before its cancel, so an
  // answer other than CANCELLED (or a clean refusal of a read overdue) is
  // the server refusing or failing it.
  std::printf("unary cancels: %d CANCELLED, %d refused as overdue\n", cancelled.load(), overdue.load());
  EXPECT_EQ(cancelled.load() + overdue.load(), 40) << "answers other than CANCELLED:" << other_statuses;
  EXPECT_GE(cancelled.load(), 20) << "most calls must end as their clients cancelled them";

  ExpectServingAndBudgetReturned();
  // Some of them were cancelled while queued (the small ones at least; the
  // rest before they were read, or while they were decoded).
  const double cancelled_in_queue =
      MetricValue(ScrapeMetrics(*server_), "infergate_rejections_total{model=\"slow\",reason=\"cancelled\"}");
  std::printf("unary cancels: %.0f of 40 answered from the queue\n", cancelled_in_queue);
  EXPECT_GE(cancelled_in_queue, 1.0);
  ExpectCleanStop();
}

// A stream whose deadline passes while its requests wait behind the busy
// clients: the stream ends DEADLINE_EXCEEDED without an answer, and its
// requests leave the queue
// (cancelled when gRPC's done notice reaches the stream, or expired by the
// queue itself) and their budget comes back.
TEST_F(Cancellation, AStreamWhoseDeadlinePassesHasItsQueuedRequestsDropped) {
  auto dropped = [&] {
    const std::string text = ScrapeMetrics(*server_);
    double n = 0;
    for (const char* reason : {"cancelled", "deadline"}) {
      const double v =
          MetricValue(text, std::string("infergate_rejections_total{model=\"slow\",reason=\"") + reason + "\"}");
      if (!std::isnan(v)) n += v;
    }
    return n;
  };
  const double dropped_before = dropped();
  constexpr int kRequests = 3;
  const auto started = std::chrono::steady_clock::now();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  auto stream = v2_stub_->ModelStreamInfer(&ctx);
  const inference::ModelInferRequest small = TypedSlowRequest(4);
  for (int i = 0; i < kRequests; ++i) ASSERT_TRUE(stream->Write(small));
  int answers = 0;
  inference::ModelStreamInferResponse response;
  while (stream->Read(&response)) answers++;
  const grpc::Status status = stream->Finish();
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_EQ(answers, 0) << "an answer came for a request queued behind about a second of work each";
  std::printf("stream deadline 0.5 s: ended after %.2f s\n", took_s);
  bool all_dropped = false;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !all_dropped && std::chrono::steady_clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    all_dropped = dropped() - dropped_before >= kRequests;
  }
  EXPECT_TRUE(all_dropped) << "requests of the stream dropped: " << dropped() - dropped_before << " of " << kRequests;
  ExpectServingAndBudgetReturned();
  ExpectCleanStop();
}

// A client that keeps its stream open, neither closing its side nor
// cancelling, does not hold the server up: SIGTERM ends the stream (the
// client sees it end with an error) and the process exits cleanly.
TEST(Streams, AStreamLeftOpenEndsWhenTheServerStops) {
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--devices=cpu", "--drain-timeout=5s"});
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  auto v2_stub = inference::GRPCInferenceService::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = v2_stub->ModelStreamInfer(&ctx);
  ASSERT_TRUE(stream->Write(MlpV2Request()));
  inference::ModelStreamInferResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.error_message(), "");
  // The stream stays open while the server stops; ServerProcess::Stop
  // kills a server that has not exited 30 s after SIGTERM, and that answers -1.
  EXPECT_EQ(server->Stop(), 0) << server->Log();
  while (stream->Read(&response)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_FALSE(status.ok()) << "a stream still open when the server stopped ended OK";
}

// A client that writes 1 MiB requests on a stream and never reads the
// answers (each 1 MiB too): the stream stops reading once it holds
// InferStream::kMaxHeldBytes of answers, so the client's writes
// stall on flow control instead of the server holding every answer. It
// used to read everything and hold +368 MiB in 16 s. Meanwhile another
// client is answered, and after the stream is cancelled the server still
// serves and exits cleanly.
TEST(Streams, AClientThatStopsReadingIsHeldBackAndMemoryStaysBounded) {
  constexpr uint64_t kBudgetMiB = 64, kHeldMiB = 64, kMarginMiB = 96;
  auto server = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--devices=cpu",
                                      "--max-inflight-bytes=" + std::to_string(kBudgetMiB) + "MiB"});
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  auto v2_stub = inference::GRPCInferenceService::NewStub(channel);
  inference::ModelInferRequest big;  // `fails` doubles x: a 1 MiB answer for a 1 MiB request
  big.set_model_name("fails");
  auto* in = big.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(1 << 18);
  big.add_raw_input_contents(std::string(4 << 18, '\0'));
  {  // load the model before measuring
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    ASSERT_TRUE(v2_stub->ModelInfer(&ctx, big, &resp).ok());
  }
  const uint64_t before_kib = ProcStatusKib(server->pid(), "VmRSS:");
  ASSERT_TRUE(ResetPeakRss(server->pid()));

  constexpr int kRequests = 400;
  std::atomic<int> written{0};
  grpc::ClientContext stream_ctx;
  auto stream = v2_stub->ModelStreamInfer(&stream_ctx);
  std::thread writer([&] {
    for (int i = 0; i < kRequests && stream->Write(big); ++i) written++;
  });
  // The writer stalls: wait until it has made no progress for a second.
  int last = -1;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       written.load() != last && written.load() < kRequests && std::chrono::steady_clock::now() < deadline;) {
    last = written.load();
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  const int stalled_at = written.load();
  // Another client is still answered.
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    inference::ModelInferResponse resp;
    grpc::Status s = v2_stub->ModelInfer(&ctx, big, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  const uint64_t peak_kib = ProcStatusKib(server->pid(), "VmHWM:");
  stream_ctx.TryCancel();
  writer.join();
  inference::ModelStreamInferResponse ignored;
  while (stream->Read(&ignored)) {
  }
  stream->Finish();
  const uint64_t growth_mib = peak_kib > before_kib ? (peak_kib - before_kib) / 1024 : 0;
  std::printf(
      "unread stream: the client wrote %d of %d 1 MiB requests before stalling; RSS before %llu MiB, "
      "peak %llu MiB, growth %llu MiB (held answers %llu MiB + budget %llu MiB + margin %llu MiB)\n",
      stalled_at, kRequests, static_cast<unsigned long long>(before_kib / 1024),
      static_cast<unsigned long long>(peak_kib / 1024), static_cast<unsigned long long>(growth_mib),
      static_cast<unsigned long long>(kHeldMiB), static_cast<unsigned long long>(kBudgetMiB),
      static_cast<unsigned long long>(kMarginMiB));
  EXPECT_LT(stalled_at, kRequests) << "the server read every request of a stream whose client never reads";
  if (MemoryBoundsApply()) {
    EXPECT_LE(growth_mib, kHeldMiB + kBudgetMiB + kMarginMiB);
  }
  using Health = grpc::health::v1::HealthCheckResponse;
  EXPECT_EQ(HealthStatus(server->address(), "", std::chrono::seconds(30)), Health::SERVING) << server->Log();
  v2_stub.reset();
  channel.reset();
  EXPECT_EQ(server->Stop(), 0) << server->Log();
}

}  // namespace
}  // namespace infergate::testing
