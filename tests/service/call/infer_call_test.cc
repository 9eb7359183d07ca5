// The front ends' one call path, in process, against a fake core: every
// refusal (token, draining, budget, bad request) and every end (answered,
// core error, encoding error, cancelled before, while and after queueing)
// finishes the call exactly once with its status, is counted the same way
// for every front end, and returns the call's share of the budget.

#include "service/call/infer_call.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/cancel_signal.h"
#include "common/caught_exception.h"
#include "service/open_inference/open_inference_rest.h"
#include "tests/common/scratch_dir.h"
#include "tests/service/fake_core.h"

namespace infergate {
namespace {

class RecordingObserver final : public InferCallObserver {
 public:
  struct Record {
    std::string model;
    absl::StatusCode code;
    bool ran;
  };
  void RecordInfer(const RequestLabels& labels, const absl::Status& status, const InferenceResult* result,
                   uint64_t) override {
    std::lock_guard<std::mutex> lock(mu);
    records.push_back({labels.model, status.code(), result != nullptr});
  }
  void OnAdmissionRejection(RejectionReason reason) override {
    std::lock_guard<std::mutex> lock(mu);
    rejections.push_back(std::string(RejectionReasonName(reason)));
  }
  void OnHandlerInput(const std::string&, double) override {}
  std::mutex mu;
  std::vector<Record> records;
  std::vector<std::string> rejections;
};

std::string TokenFile(const std::string& token) {
  return testing::ProcessScratchDir().File("infer_call_tokens_", token + "\n");
}

// Collects how a call finished.
struct Ends {
  std::vector<absl::Status> statuses;
  InferCall::Finish Finish() {
    return [this](const absl::Status& s) { statuses.push_back(s); };
  }
};

class InferCallTest : public ::testing::Test {
 protected:
  explicit InferCallTest(TokenAuth auth = {}, uint64_t budget_bytes = 1000)
      : budget_(budget_bytes), environment_(core_.Backend(), CodecLimits{}, std::move(auth), &budget_, &observer_) {}

  std::shared_ptr<InferCall> Begin(const std::string& model = "known") {
    return InferCall::Begin(environment_, model, ends_.Finish());
  }
  static absl::string_view NoToken() { return ""; }
  // Submits an admitted call whose encoder records that it ran.
  void Submit(InferCall& call, absl::Status encode_status = absl::OkStatus()) {
    InferenceRequest request;
    request.model = "known";
    call.Submit(std::move(request), [this, encode_status](InferenceResult&) {
      encoded_++;
      return encode_status;
    });
  }

  FakeCore core_;
  RecordingObserver observer_;
  InflightBudget budget_;
  CallEnvironment environment_;
  Ends ends_;
  int encoded_ = 0;
};

TEST_F(InferCallTest, AnAnsweredCallIsEncodedFinishedOkAndCounted) {
  auto call = Begin();
  ASSERT_TRUE(call->Admit(NoToken, 100));
  EXPECT_EQ(budget_.in_use(), 100u);
  Submit(*call);
  ASSERT_EQ(core_.size(), 1u);
  EXPECT_EQ(core_.at(0).request.received, call->received());
  EXPECT_TRUE(ends_.statuses.empty()) << "finished before the core answered";
  core_.Answer(0, InferenceResult{});
  ASSERT_EQ(ends_.statuses.size(), 1u);
  EXPECT_TRUE(ends_.statuses[0].ok());
  EXPECT_EQ(encoded_, 1);
  ASSERT_EQ(observer_.records.size(), 1u);
  EXPECT_EQ(observer_.records[0].model, "known");
  EXPECT_TRUE(observer_.records[0].ran);
  EXPECT_EQ(environment_.tally().Summary(), "answered 1 inference call: OK 1");
  EXPECT_EQ(budget_.in_use(), 100u) << "the transport still holds the call";
  call.reset();
  EXPECT_EQ(budget_.in_use(), 0u) << "the budget share outlived the call";
}

TEST_F(InferCallTest, CoreAndEncodingErrorsReachTheClientAndCountAsNotRun) {
  auto failed = Begin();
  ASSERT_TRUE(failed->Admit(NoToken, 1));
  Submit(*failed);
  core_.Answer(0, absl::ResourceExhaustedError("queue full"));
  auto unencodable = Begin();
  ASSERT_TRUE(unencodable->Admit(NoToken, 1));
  Submit(*unencodable, absl::InvalidArgumentError("outputs: cannot be sent"));
  core_.Answer(1, InferenceResult{});
  ASSERT_EQ(ends_.statuses.size(), 2u);
  EXPECT_EQ(ends_.statuses[0].code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ends_.statuses[1].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(encoded_, 1) << "a failed request was encoded";
  ASSERT_EQ(observer_.records.size(), 2u);
  EXPECT_FALSE(observer_.records[0].ran);
  EXPECT_FALSE(observer_.records[1].ran);
  EXPECT_EQ(observer_.records[1].code, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(environment_.tally().Summary(), "answered 2 inference calls: INVALID_ARGUMENT 1, RESOURCE_EXHAUSTED 1");
}

// No exception ends the process: an encoder or a core that throws ends
// the call INTERNAL with what was thrown, once, and it is counted.
TEST_F(InferCallTest, AnEncoderOrCoreThatThrowsEndsTheCallInternal) {
  const uint64_t caught_before = CaughtExceptionCount();
  auto call = Begin();
  ASSERT_TRUE(call->Admit(NoToken, 10));
  InferenceRequest request;
  request.model = "known";
  call->Submit(std::move(request), [](InferenceResult&) -> absl::Status { throw std::bad_alloc(); });
  core_.Answer(0, InferenceResult{});
  ASSERT_EQ(ends_.statuses.size(), 1u);
  EXPECT_EQ(ends_.statuses[0].code(), absl::StatusCode::kInternal);
  EXPECT_NE(ends_.statuses[0].message().find("encoding the answer failed: out of memory"), std::string::npos)
      << ends_.statuses[0];

  core_.throw_at_submit = true;
  auto broken = Begin();
  ASSERT_TRUE(broken->Admit(NoToken, 10));
  Submit(*broken);
  ASSERT_EQ(ends_.statuses.size(), 2u);
  EXPECT_EQ(ends_.statuses[1].code(), absl::StatusCode::kInternal);
  EXPECT_NE(ends_.statuses[1].message().find("the core broke"), std::string::npos) << ends_.statuses[1];
  EXPECT_EQ(CaughtExceptionCount(), caught_before + 2);
}

TEST_F(InferCallTest, AnAnswerGivenBeforeInferReturnsFinishesOnce) {
  core_.refuse_at_submit = absl::NotFoundError("model 'known' has no version 9");
  auto call = Begin();
  ASSERT_TRUE(call->Admit(NoToken, 1));
  Submit(*call);
  call->Cancel();  // the handle was not kept: nothing to cancel
  ASSERT_EQ(ends_.statuses.size(), 1u);
  EXPECT_EQ(ends_.statuses[0].code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(core_.at(0).cancels, 0);
}

TEST_F(InferCallTest, DrainingRefusesEveryEntryAndCountsIt) {
  environment_.StartDraining();
  auto unary = Begin();
  EXPECT_FALSE(unary->Admit(NoToken, 1));
  auto on_stream = Begin();
  EXPECT_FALSE(on_stream->AdmitOnStream(1));
  ASSERT_EQ(ends_.statuses.size(), 2u);
  for (const absl::Status& s : ends_.statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(s.message().find("draining"), std::string::npos) << s;
  }
  EXPECT_EQ(observer_.rejections, (std::vector<std::string>{"draining", "draining"}));
  EXPECT_EQ(environment_.tally().Summary(), "answered 2 inference calls: UNAVAILABLE 2; 2 refused while draining");
  ASSERT_EQ(observer_.records.size(), 2u);
  EXPECT_EQ(observer_.records[1].model, "known");
  EXPECT_EQ(core_.size(), 0u);
}

TEST_F(InferCallTest, ABudgetRefusalIsCountedAndHoldsNothing) {
  auto big = Begin();
  EXPECT_FALSE(big->Admit(NoToken, 1001));
  EXPECT_FALSE(Begin()->AdmitOnStream(5000));
  ASSERT_EQ(ends_.statuses.size(), 2u);
  EXPECT_EQ(ends_.statuses[0].code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(observer_.rejections, (std::vector<std::string>{"inflight_bytes", "inflight_bytes"}));
  EXPECT_EQ(budget_.in_use(), 0u);
  // A temporary reservation is refused the same way, without finishing.
  auto call = Begin();
  ASSERT_TRUE(call->Admit(NoToken, 600));
  absl::StatusOr<InflightBudget::Reservation> tree = call->Reserve(600);
  EXPECT_EQ(tree.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ends_.statuses.size(), 2u);
  absl::StatusOr<InflightBudget::Reservation> small = call->Reserve(300);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(budget_.in_use(), 900u);
  *small = InflightBudget::Reservation();
  EXPECT_EQ(budget_.in_use(), 600u);
}

TEST_F(InferCallTest, ARefusedBadRequestIsLabelledOnlyWithARepositoryModel) {
  auto known = Begin("known");
  ASSERT_TRUE(known->Admit(NoToken, 10));
  known->Refuse(absl::InvalidArgumentError("inputs[0].shape: -1"));
  auto unknown = Begin("made-up-by-the-client");
  ASSERT_TRUE(unknown->Admit(NoToken, 10));
  unknown->Refuse(absl::InvalidArgumentError("inputs[0].shape: -1"));
  ASSERT_EQ(observer_.records.size(), 2u);
  EXPECT_EQ(observer_.records[0].model, "known");
  EXPECT_EQ(observer_.records[1].model, "");
  EXPECT_EQ(core_.size(), 0u);
  known.reset();
  unknown.reset();
  EXPECT_EQ(budget_.in_use(), 0u);
}

TEST_F(InferCallTest, CancelBeforeSubmitCancelsOnSubmission) {
  auto call = Begin();
  ASSERT_TRUE(call->Admit(NoToken, 1));
  call->Cancel();
  Submit(*call);
  ASSERT_EQ(ends_.statuses.size(), 1u);
  EXPECT_EQ(ends_.statuses[0].code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(core_.at(0).cancels, 1);
}

TEST_F(InferCallTest, CancelWhileQueuedAnswersCancelledOnce) {
  auto call = Begin();
  ASSERT_TRUE(call->Admit(NoToken, 1));
  Submit(*call);
  call->Cancel();
  call->Cancel();
  core_.Answer(0, InferenceResult{});  // too late: already answered
  ASSERT_EQ(ends_.statuses.size(), 1u);
  EXPECT_EQ(ends_.statuses[0].code(), absl::StatusCode::kCancelled);
  ASSERT_EQ(observer_.records.size(), 1u);
  EXPECT_EQ(observer_.records[0].code, absl::StatusCode::kCancelled);
}

TEST_F(InferCallTest, CancelAfterTheAnswerTouchesNothing) {
  auto call = Begin();
  ASSERT_TRUE(call->Admit(NoToken, 1));
  Submit(*call);
  core_.Answer(0, InferenceResult{});
  call->Cancel();
  EXPECT_EQ(core_.at(0).cancels, 0) << "the finished request's handle was kept";
  EXPECT_EQ(ends_.statuses.size(), 1u);
}

TEST_F(InferCallTest, AClientThatHangsUpCancelsThroughItsSignal) {
  auto call = Begin();
  ASSERT_TRUE(call->Admit(NoToken, 1));
  CancelSignal gone;
  gone.Subscribe([weak = std::weak_ptr<InferCall>(call)] {
    if (auto c = weak.lock()) c->Cancel();
  });
  Submit(*call);
  gone.Fire();
  ASSERT_EQ(ends_.statuses.size(), 1u);
  EXPECT_EQ(ends_.statuses[0].code(), absl::StatusCode::kCancelled);
}

class InferCallWithTokensTest : public InferCallTest {
 protected:
  InferCallWithTokensTest()
      : InferCallTest(*TokenAuth::FromFiles(TokenFile("inference-token-0001"), "", TokenAuth::AdminAccess::kDisabled)) {
  }
};

TEST_F(InferCallWithTokensTest, AMissingOrWrongTokenIsRefusedBeforeAnythingElse) {
  environment_.StartDraining();  // the token is checked first
  auto none = Begin();
  EXPECT_FALSE(none->Admit(NoToken, 1));
  auto wrong = Begin();
  EXPECT_FALSE(wrong->Admit([] { return absl::string_view("Bearer nope"); }, 1));
  ASSERT_EQ(ends_.statuses.size(), 2u);
  EXPECT_EQ(ends_.statuses[0].code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ends_.statuses[1].code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(observer_.rejections.empty());
  auto right = Begin();
  EXPECT_FALSE(right->Admit([] { return absl::string_view("Bearer inference-token-0001"); }, 1));
  EXPECT_EQ(ends_.statuses.back().code(), absl::StatusCode::kUnavailable) << "draining comes after the token";
}

TEST(CancelSignal, ReactionsRunOnceAndLateSubscribersAtOnce) {
  CancelSignal signal;
  int early = 0, late = 0;
  signal.Subscribe([&] { ++early; });
  EXPECT_FALSE(signal.fired());
  signal.Fire();
  signal.Fire();
  EXPECT_TRUE(signal.fired());
  signal.Subscribe([&] { ++late; });
  EXPECT_EQ(early, 1);
  EXPECT_EQ(late, 1);
}

TEST(CancelSignal, AReactionMaySubscribeAgain) {
  CancelSignal signal;
  int inner = 0;
  signal.Subscribe([&] { signal.Subscribe([&] { ++inner; }); });
  signal.Fire();
  EXPECT_EQ(inner, 1);
}

TEST(RestDeadline, TheHeaderIsAPositiveCountOfMilliseconds) {
  const Clock::time_point received = Clock::now();
  HttpRequest request;
  EXPECT_EQ(*RestDeadline(request, received), Clock::time_point::max());
  request.headers = {{kDeadlineHeader, "250"}};
  EXPECT_EQ(*RestDeadline(request, received), received + std::chrono::milliseconds(250));
  request.headers = {{kDeadlineHeader, "99999999999999999999"}};
  EXPECT_FALSE(RestDeadline(request, received).ok()) << "does not fit 64 bits";
  request.headers = {{kDeadlineHeader, "4503599627370497"}};
  EXPECT_EQ(*RestDeadline(request, received), Clock::time_point::max());
  for (const char* bad : {"0", "-5", "1.5", "soon", "10ms"}) {
    request.headers = {{kDeadlineHeader, bad}};
    absl::StatusOr<Clock::time_point> d = RestDeadline(request, received);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(d.status().message().find(kDeadlineHeader), std::string::npos) << d.status();
  }
}

}  // namespace
}  // namespace infergate
