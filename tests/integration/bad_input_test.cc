// Every malformed request gets its status code and a message naming the field.

#include <grpcpp/generic/generic_stub.h>

#include <future>

#include "tests/integration/server_fixture.h"

namespace infergate::testing {
namespace {

struct BadCase {
  std::string what;
  std::function<void(v1::InferRequest*)> mutate;
  grpc::StatusCode code;
  std::string expect;  // the field or model the message must name
};

std::vector<BadCase> BadCases() {
  auto set_shape = [](v1::InferRequest* r, std::vector<int64_t> shape) {
    r->mutable_inputs(0)->clear_shape();
    for (int64_t d : shape) r->mutable_inputs(0)->add_shape(d);
  };
  using C = grpc::StatusCode;
  return {
      {"empty request", [](v1::InferRequest* r) { r->Clear(); }, C::INVALID_ARGUMENT, "model"},
      {"unknown model", [](v1::InferRequest* r) { r->set_model("nope"); }, C::NOT_FOUND, "nope"},
      {"unknown version", [](v1::InferRequest* r) { r->set_version("9"); }, C::NOT_FOUND, "version"},
      {"bad version", [](v1::InferRequest* r) { r->set_version("latest"); }, C::INVALID_ARGUMENT, "version"},
      {"dotdot model", [](v1::InferRequest* r) { r->set_model("../mlp"); }, C::INVALID_ARGUMENT, "model"},
      {"absolute model", [](v1::InferRequest* r) { r->set_model("/etc/passwd"); }, C::INVALID_ARGUMENT, "model"},
      {"no inputs", [](v1::InferRequest* r) { r->clear_inputs(); }, C::INVALID_ARGUMENT, "inputs"},
      {"extra input", [](v1::InferRequest* r) { *r->add_inputs() = r->inputs(0); }, C::INVALID_ARGUMENT, "inputs"},
      {"wrong name", [](v1::InferRequest* r) { r->mutable_inputs(0)->set_name("y"); }, C::INVALID_ARGUMENT,
       "inputs[0].name"},
      {"wrong dtype", [](v1::InferRequest* r) { r->mutable_inputs(0)->set_dtype(v1::INT32); }, C::INVALID_ARGUMENT,
       "inputs[0].dtype"},
      {"unset dtype", [](v1::InferRequest* r) { r->mutable_inputs(0)->set_dtype(v1::DATA_TYPE_UNSPECIFIED); },
       C::INVALID_ARGUMENT, "inputs[0].dtype"},
      {"wrong rank", [&](v1::InferRequest* r) { set_shape(r, {256}); }, C::INVALID_ARGUMENT, "inputs[0].shape"},
      {"wrong dim", [&](v1::InferRequest* r) { set_shape(r, {2, 128}); }, C::INVALID_ARGUMENT, "inputs[0].shape[1]"},
      {"bytes mismatch", [&](v1::InferRequest* r) { set_shape(r, {2, 256}); }, C::INVALID_ARGUMENT, "inputs[0].data"},
      {"truncated data", [](v1::InferRequest* r) { r->mutable_inputs(0)->mutable_data()->resize(1000); },
       C::INVALID_ARGUMENT, "inputs[0].data"},
      {"negative dim", [&](v1::InferRequest* r) { set_shape(r, {1, -256}); }, C::INVALID_ARGUMENT,
       "inputs[0].shape[1]"},
      {"absurd dims", [&](v1::InferRequest* r) { set_shape(r, {INT64_MAX, INT64_MAX}); }, C::INVALID_ARGUMENT,
       "inputs[0].shape"},
      {"rank 40", [&](v1::InferRequest* r) { set_shape(r, std::vector<int64_t>(40, 1)); }, C::INVALID_ARGUMENT,
       "inputs[0].shape"},
      {"batch over max",
       [&](v1::InferRequest* r) {
         set_shape(r, {65, 256});
         r->mutable_inputs(0)->mutable_data()->resize(65 * 256 * 4);
       },
       C::INVALID_ARGUMENT, "inputs[0].shape[0]"},
      {"unknown device", [](v1::InferRequest* r) { r->set_device("gpu:0"); }, C::INVALID_ARGUMENT, "device"},
      {"bad precision", [](v1::InferRequest* r) { r->set_precision(static_cast<v1::Precision>(17)); },
       C::INVALID_ARGUMENT, "precision"},
      {"bad fallback", [](v1::InferRequest* r) { r->set_fallback(static_cast<v1::FallbackPolicy>(9)); },
       C::INVALID_ARGUMENT, "fallback"},
      {"broken config", [](v1::InferRequest* r) { r->set_model("badconfig"); }, C::FAILED_PRECONDITION, "config.pbtxt"},
  };
}

TEST_F(ServerTest, EveryBadInputGetsItsCodeAndNamesTheField) {
  for (const BadCase& c : BadCases()) {
    v1::InferRequest req = Request("mlp", {{"x", at::randn({1, 256})}});
    c.mutate(&req);
    v1::InferResponse resp;
    grpc::Status s = Infer(req, &resp);
    EXPECT_EQ(s.error_code(), c.code) << c.what << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(c.expect), std::string::npos) << c.what << ": " << s.error_message();
  }
}

TEST_F(ServerTest, HundredsOfMalformedRequestsThenAGoodOne) {
  std::vector<BadCase> cases = BadCases();
  for (int i = 0; i < 400; ++i) {
    const BadCase& c = cases[i % cases.size()];
    v1::InferRequest req = Request("mlp", {{"x", at::randn({1, 256})}});
    c.mutate(&req);
    v1::InferResponse resp;
    ASSERT_EQ(Infer(req, &resp).error_code(), c.code) << c.what;
  }
  ASSERT_TRUE(server_->Alive());
  ExpectAgreement("mlp", {{"x", at::randn({2, 256})}}, v1::FLOAT32);
}

TEST_F(ServerTest, OversizedMessagesAreResourceExhausted) {
  auto small = ServerProcess::Start({"--model-repository=" + DemoRepository(), "--max-receive-bytes=65536"});
  ASSERT_NE(small, nullptr);
  auto stub = v1::InferenceService::NewStub(grpc::CreateChannel(small->address(), grpc::InsecureChannelCredentials()));
  v1::InferRequest req = Request("mlp", {{"x", at::randn({64, 256})}});  // 64 KiB of floats + framing
  grpc::ClientContext ctx;
  v1::InferResponse resp;
  grpc::Status s = stub->Infer(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  grpc::ClientContext ok_ctx;
  EXPECT_TRUE(stub->Infer(&ok_ctx, Request("mlp", {{"x", at::randn({8, 256})}}), &resp).ok());
  stub.reset();
  EXPECT_EQ(small->Stop(), 0);
}

// A unary inference call opened as a raw stream of bytes, so that a test
// can end it in ways a generated stub never does: half-closed with no
// message, or cancelled before any.
class RawInferCall : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  RawInferCall(grpc::Channel& channel, const std::string& method) {
    grpc::GenericStub stub(std::shared_ptr<grpc::Channel>(&channel, [](grpc::Channel*) {}));
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    stub.PrepareBidiStreamingCall(&ctx_, method, grpc::StubOptions(), this);
    StartRead(&answer_);
    StartCall();
  }
  void HalfCloseWithoutMessage() { StartWritesDone(); }
  void Cancel() { ctx_.TryCancel(); }
  grpc::Status Wait() { return done_.get_future().get(); }

  void OnReadDone(bool) override {}
  void OnDone(const grpc::Status& status) override { done_.set_value(status); }

 private:
  grpc::ClientContext ctx_;
  grpc::ByteBuffer answer_;
  std::promise<grpc::Status> done_;
};

// A call with no message is a bad request (INVALID_ARGUMENT), but one whose
// client went away before sending it is a cancelled call, and the server
// counts it so: a load tool ending its run leaves such calls behind, and
// the benchmark holds the server's count of calls it answered with errors
// at zero.
TEST_F(ServerTest, ACallWithNoMessageIsRefusedAndOneLeftBeforeItsMessageIsCancelled) {
  auto own = ServerProcess::Start({"--model-repository=" + DemoRepository()});
  ASSERT_NE(own, nullptr);
  auto channel = grpc::CreateChannel(own->address(), grpc::InsecureChannelCredentials());
  for (const char* method : {"/infergate.v1.InferenceService/Infer", "/inference.GRPCInferenceService/ModelInfer"}) {
    RawInferCall empty(*channel, method);
    empty.HalfCloseWithoutMessage();
    const grpc::Status refused = empty.Wait();
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method << ": " << refused.error_message();
    EXPECT_NE(refused.error_message().find("no request message"), std::string::npos) << refused.error_message();
  }
  for (int i = 0; i < 3; ++i) {
    RawInferCall left(*channel, "/inference.GRPCInferenceService/ModelInfer");
    // The server has the call (its headers) before the client leaves.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    left.Cancel();
    EXPECT_EQ(left.Wait().error_code(), grpc::StatusCode::CANCELLED);
  }
  ASSERT_EQ(own->Stop(), 0);
  const std::string log = own->Log();
  const size_t at = log.rfind("] answered ");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string line = log.substr(at, log.find('\n', at) - at);
  EXPECT_NE(line.find("answered 5 inference calls: CANCELLED 3, INVALID_ARGUMENT 2"), std::string::npos) << line;
}

TEST_F(ServerTest, ThrowingAndCorruptModelsFailAloneWithClearMessages) {
  v1::InferResponse resp;
  grpc::Status s = Infer(Request("fails", {{"x", -at::ones({4})}}), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_NE(s.error_message().find("negative input to fails"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("'fails'"), std::string::npos) << s.error_message();
  ASSERT_TRUE(Infer(Request("fails", {{"x", at::ones({4})}}), &resp).ok());
  EXPECT_FLOAT_EQ(FromWire(resp.outputs(0))[0].item<float>(), 2.0f);

  s = Infer(Request("corrupt", {{"x", at::ones({2})}}), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("corrupt"), std::string::npos) << s.error_message();
  ExpectAgreement("mlp", {{"x", at::randn({1, 256})}}, v1::FLOAT32);
}

}  // namespace
}  // namespace infergate::testing
