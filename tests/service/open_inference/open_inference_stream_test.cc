// The ModelStreamInfer stream's logic (InferStream) in process, over a
// transport and a core the test drives step by step: answers leave in
// request order (or as they are ready, when asked), each is its request's
// final one, a bad request (or a message that is not one) is answered
// in-band and the stream goes on, a
// stream that holds its limit stops reading until the client catches up,
// cancelling cancels every request in flight, and the stream finishes only
// once every answer is written.

#include "service/open_inference/open_inference_stream.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "service/call/inflight_budget.h"
#include "tests/service/fake_core.h"

namespace infergate {
namespace {

// Records what the stream starts; the test ends each operation itself.
// One read and one write may be outstanding at a time.
class FakeTransport final : public InferStream::Transport {
 public:
  void StartRead(inference::ModelInferRequest* request) override {
    EXPECT_EQ(reading, nullptr) << "a second read started while one was outstanding";
    reading = request;
  }
  void StartWrite(const inference::ModelStreamInferResponse* response, grpc::WriteOptions options) override {
    EXPECT_EQ(writing, nullptr) << "a second write started while one was outstanding";
    writing = response;
    buffer_hint = options.get_buffer_hint();
  }
  void Finish(const grpc::Status& status) override {
    EXPECT_FALSE(finished.has_value()) << "finished twice";
    finished = status;
  }

  inference::ModelInferRequest* reading = nullptr;
  const inference::ModelStreamInferResponse* writing = nullptr;
  bool buffer_hint = false;
  std::optional<grpc::Status> finished;
};

// A request for the fake core's model: one FP32 input of two values.
inference::ModelInferRequest Request(const std::string& id) {
  inference::ModelInferRequest request;
  request.set_model_name("known");
  request.set_id(id);
  auto* input = request.add_inputs();
  input->set_name("x");
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(2);
  request.add_raw_input_contents(std::string(8, '\0'));
  return request;
}

inference::ModelInferRequest CompletionOrderRequest(const std::string& id) {
  inference::ModelInferRequest request = Request(id);
  (*request.mutable_parameters())["stream_order"].set_string_param("completion");
  return request;
}

InferenceResult Result() {
  InferenceResult result;
  result.outputs.push_back({"y", at::ones({1, 2})});
  result.placement.device = "cpu";
  return result;
}

class InferStreamTest : public ::testing::Test {
 protected:
  InferStreamTest()
      : budget_(uint64_t{1} << 30), environment_(core_.Backend(), CodecLimits{}, TokenAuth{}, &budget_, nullptr) {}

  // The client sends `request`: the outstanding read ends with it.
  void Send(const inference::ModelInferRequest& request) {
    ASSERT_NE(transport_.reading, nullptr) << "no read outstanding";
    *transport_.reading = request;
    transport_.reading = nullptr;
    stream_.OnReadDone(true);
  }
  // The client closes its side: the outstanding read ends without a request.
  void CloseSends() {
    ASSERT_NE(transport_.reading, nullptr) << "no read outstanding";
    transport_.reading = nullptr;
    stream_.OnReadDone(false);
  }
  // The outstanding write reaches the client; returns what it wrote.
  inference::ModelStreamInferResponse Deliver() {
    EXPECT_NE(transport_.writing, nullptr) << "no write outstanding";
    if (transport_.writing == nullptr) return {};
    inference::ModelStreamInferResponse written = *transport_.writing;
    transport_.writing = nullptr;
    stream_.OnWriteDone(true);
    return written;
  }
  // Delivers every answer written from now on until none is outstanding.
  std::vector<inference::ModelStreamInferResponse> DeliverAll() {
    std::vector<inference::ModelStreamInferResponse> written;
    while (transport_.writing != nullptr) written.push_back(Deliver());
    return written;
  }

  FakeCore core_;
  InflightBudget budget_;
  CallEnvironment environment_;
  grpc::ServerContext ctx_;
  FakeTransport transport_;
  InferStream stream_{transport_, environment_, ctx_};
};

TEST_F(InferStreamTest, AnswersLeaveInRequestOrderEachMarkedFinal) {
  stream_.Start(absl::OkStatus());
  for (const char* id : {"a", "b", "c"}) Send(Request(id));
  ASSERT_EQ(core_.size(), 3u) << "each request is submitted as it is read";
  ASSERT_NE(transport_.reading, nullptr) << "the next read starts at once";
  core_.Answer(2, Result());
  core_.Answer(1, Result());
  EXPECT_EQ(transport_.writing, nullptr) << "an answer left before the answer of an earlier request";
  core_.Answer(0, Result());
  ASSERT_NE(transport_.writing, nullptr);
  EXPECT_FALSE(transport_.buffer_hint) << "the stream's first answer carries its initial metadata: not buffered";
  inference::ModelStreamInferResponse first = Deliver();
  EXPECT_EQ(first.error_message(), "");
  EXPECT_EQ(first.infer_response().id(), "a");
  EXPECT_EQ(first.infer_response().outputs(0).name(), "y");
  EXPECT_TRUE(first.infer_response().parameters().at("triton_final_response").bool_param());
  EXPECT_TRUE(transport_.buffer_hint) << "an answer with another behind it is buffered";
  EXPECT_EQ(Deliver().infer_response().id(), "b");
  EXPECT_FALSE(transport_.buffer_hint) << "the last answer ready is sent, not buffered";
  EXPECT_EQ(Deliver().infer_response().id(), "c");
  EXPECT_FALSE(transport_.finished.has_value()) << "finished while the client could still send";
  CloseSends();
  ASSERT_TRUE(transport_.finished.has_value());
  EXPECT_TRUE(transport_.finished->ok()) << transport_.finished->error_message();
  EXPECT_EQ(budget_.in_use(), 0u);
}

TEST_F(InferStreamTest, CompletionOrderAnswersLeaveAsSoonAsReady) {
  stream_.Start(absl::OkStatus());
  Send(Request("ordered"));
  Send(CompletionOrderRequest("early"));
  Send(CompletionOrderRequest("late"));
  core_.Answer(1, Result());
  ASSERT_NE(transport_.writing, nullptr) << "a completion-order answer waited for an earlier request";
  EXPECT_EQ(Deliver().infer_response().id(), "early");
  core_.Answer(0, Result());
  EXPECT_EQ(Deliver().infer_response().id(), "ordered");
  core_.Answer(2, Result());
  EXPECT_EQ(Deliver().infer_response().id(), "late");
}

TEST_F(InferStreamTest, TheStreamFinishesOnlyOnceEveryAnswerIsWritten) {
  stream_.Start(absl::OkStatus());
  Send(Request("a"));
  CloseSends();
  EXPECT_FALSE(transport_.finished.has_value()) << "finished with a request in flight";
  core_.Answer(0, Result());
  ASSERT_NE(transport_.writing, nullptr);
  EXPECT_FALSE(transport_.finished.has_value()) << "finished with a write outstanding";
  Deliver();
  ASSERT_TRUE(transport_.finished.has_value());
  EXPECT_TRUE(transport_.finished->ok());
}

TEST_F(InferStreamTest, BadRequestsAreAnsweredInBandInTheirPlaceAndTheStreamGoesOn) {
  stream_.Start(absl::OkStatus());
  inference::ModelInferRequest bad_order = Request("bad order");
  (*bad_order.mutable_parameters())["stream_order"].set_int64_param(1);
  inference::ModelInferRequest bad_input = Request("bad input");
  bad_input.mutable_inputs(0)->set_datatype("FP33");
  Send(Request("first"));
  Send(bad_order);
  Send(bad_input);
  Send(Request("last"));
  ASSERT_EQ(core_.size(), 2u) << "a bad request reached the core";
  EXPECT_EQ(transport_.writing, nullptr) << "a refusal overtook the answer of an earlier request";
  core_.Answer(0, Result());
  core_.Answer(1, Result());
  const std::vector<inference::ModelStreamInferResponse> written = DeliverAll();
  ASSERT_EQ(written.size(), 4u);
  EXPECT_EQ(written[0].error_message(), "");
  EXPECT_EQ(written[1].infer_response().id(), "bad order");
  EXPECT_NE(written[1].error_message().find("parameters.stream_order"), std::string::npos)
      << written[1].error_message();
  EXPECT_TRUE(written[1].infer_response().parameters().at("triton_final_response").bool_param());
  EXPECT_EQ(written[2].infer_response().id(), "bad input");
  EXPECT_NE(written[2].error_message().find("inputs[0].datatype"), std::string::npos) << written[2].error_message();
  EXPECT_EQ(written[3].infer_response().id(), "last");
  EXPECT_EQ(written[3].error_message(), "");
  EXPECT_NE(transport_.reading, nullptr) << "the stream stopped reading after a bad request";
}

TEST_F(InferStreamTest, AnUnreadableMessageIsAnsweredInItsPlaceAndTheStreamGoesOn) {
  stream_.Start(absl::OkStatus());
  Send(Request("first"));
  ASSERT_NE(transport_.reading, nullptr);
  transport_.reading->set_id("left by a failed parse");
  transport_.reading = nullptr;
  stream_.OnUnreadableRequest(absl::InvalidArgumentError("request: the message does not parse"));
  Send(Request("last"));
  ASSERT_EQ(core_.size(), 2u) << "an unreadable message reached the core";
  core_.Answer(1, Result());
  EXPECT_EQ(transport_.writing, nullptr) << "answers left before the first request's";
  core_.Answer(0, Result());
  const std::vector<inference::ModelStreamInferResponse> written = DeliverAll();
  ASSERT_EQ(written.size(), 3u);
  EXPECT_EQ(written[0].infer_response().id(), "first");
  EXPECT_EQ(written[1].infer_response().id(), "") << "what a failed parse left was sent back";
  EXPECT_EQ(written[1].error_message(), "INVALID_ARGUMENT: request: the message does not parse");
  EXPECT_EQ(written[2].infer_response().id(), "last");
  CloseSends();
  ASSERT_TRUE(transport_.finished.has_value());
  EXPECT_TRUE(transport_.finished->ok()) << "an unreadable message ended the stream";
}

TEST_F(InferStreamTest, AStreamHoldingItsLimitStopsReadingUntilTheClientCatchesUp) {
  stream_.Start(absl::OkStatus());
  for (size_t i = 0; i < InferStream::kMaxHeldAnswers; ++i) Send(Request(std::to_string(i)));
  EXPECT_EQ(transport_.reading, nullptr) << "read on while holding " << InferStream::kMaxHeldAnswers << " requests";
  core_.Answer(0, Result());
  ASSERT_NE(transport_.writing, nullptr);
  EXPECT_EQ(transport_.reading, nullptr) << "read on while the answer was not yet written";
  Deliver();
  ASSERT_NE(transport_.reading, nullptr) << "never read again once an answer was written";
  Send(Request("next"));
  EXPECT_EQ(transport_.reading, nullptr) << "read past the limit again";
}

TEST_F(InferStreamTest, CancellingCancelsEveryRequestInFlightAndEndsTheStreamCancelled) {
  stream_.Start(absl::OkStatus());
  for (const char* id : {"a", "b", "c"}) Send(Request(id));
  core_.Answer(1, Result());  // ready, waiting for "a"
  stream_.OnCancel();
  EXPECT_EQ(core_.at(0).cancels, 1);
  EXPECT_EQ(core_.at(1).cancels, 0) << "an answered request was cancelled";
  EXPECT_EQ(core_.at(2).cancels, 1);
  EXPECT_EQ(transport_.writing, nullptr) << "wrote to a cancelled stream";
  EXPECT_FALSE(transport_.finished.has_value()) << "finished with a read outstanding";
  CloseSends();  // gRPC ends the outstanding read of a cancelled call
  ASSERT_TRUE(transport_.finished.has_value());
  EXPECT_EQ(transport_.finished->error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(budget_.in_use(), 0u);
}

TEST_F(InferStreamTest, AFailedWriteDropsTheAnswersNotYetWritten) {
  stream_.Start(absl::OkStatus());
  for (const char* id : {"a", "b"}) Send(Request(id));
  core_.Answer(0, Result());
  core_.Answer(1, Result());
  ASSERT_NE(transport_.writing, nullptr);
  transport_.writing = nullptr;
  stream_.OnWriteDone(false);  // the client is gone
  EXPECT_EQ(transport_.writing, nullptr) << "wrote on after a write failed";
  CloseSends();
  ASSERT_TRUE(transport_.finished.has_value());
  EXPECT_EQ(transport_.finished->error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(InferStreamTest, ARefusedStreamFinishesAtOnceWithoutReading) {
  stream_.Start(absl::UnauthenticatedError("authorization: missing bearer token"));
  EXPECT_EQ(transport_.reading, nullptr);
  ASSERT_TRUE(transport_.finished.has_value());
  EXPECT_EQ(transport_.finished->error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(transport_.finished->error_message(), "authorization: missing bearer token");
}

}  // namespace
}  // namespace infergate
