// Request tracing through the real server: a real OTLP receiver in this
// process collects what the server exports, for calls that carry a known
// W3C traceparent over gRPC (infergate.v1 and the Open Inference Protocol)
// and REST.

#include <algorithm>
#include <map>
#include <set>

#include "inference/grpc_service.grpc.pb.h"
#include "tests/integration/server_fixture.h"
#include "tests/service/tracing/otlp_receiver.h"

namespace infergate::testing {
namespace {

using opentelemetry::proto::trace::v1::Span;
using opentelemetry::proto::trace::v1::Span_SpanKind_SPAN_KIND_SERVER;
using opentelemetry::proto::trace::v1::Status_StatusCode_STATUS_CODE_ERROR;

// A fresh, valid W3C trace context: its trace id, its parent span id, and
// the header with the sampled flag.
struct Caller {
  std::string trace_id;
  std::string parent_id;
  std::string traceparent() const { return "00-" + trace_id + "-" + parent_id + "-01"; }
};

Caller NewCaller() {
  static std::atomic<uint64_t> n{1};
  const uint64_t k = n++;
  char trace[33], parent[17];
  std::snprintf(trace, sizeof(trace), "%016llx%016llx", 0x5eed0000ULL + static_cast<unsigned long long>(::getpid()),
                static_cast<unsigned long long>(k));
  std::snprintf(parent, sizeof(parent), "%016llx", 0xab00000000000000ULL + static_cast<unsigned long long>(k));
  return {trace, parent};
}

// The spans of one trace.
std::vector<Span> SpansOf(const std::vector<ReceivedSpan>& all, const std::string& trace_id) {
  std::vector<Span> spans;
  for (const ReceivedSpan& r : all) {
    if (HexId(r.span.trace_id()) == trace_id) spans.push_back(r.span);
  }
  return spans;
}

const Span* Named(const std::vector<Span>& spans, const std::string& name, const std::string& parent_id = "") {
  for (const Span& s : spans) {
    if (s.name() == name && (parent_id.empty() || HexId(s.parent_span_id()) == parent_id)) return &s;
  }
  return nullptr;
}

std::vector<const Span*> AllNamed(const std::vector<Span>& spans, const std::string& name) {
  std::vector<const Span*> found;
  for (const Span& s : spans) {
    if (s.name() == name) found.push_back(&s);
  }
  return found;
}

// Whether the trace's server span arrived: the server ends it after its
// children, and spans are exported in the order they ended.
bool Complete(const std::vector<ReceivedSpan>& all, const std::string& trace_id) {
  for (const Span& s : SpansOf(all, trace_id)) {
    if (s.kind() == Span_SpanKind_SPAN_KIND_SERVER) return true;
  }
  return false;
}

std::string MlpJsonBody() {
  std::string body = R"({"inputs":[{"name":"x","shape":[1,256],"datatype":"FP32","data":[)";
  for (int i = 0; i < 256; ++i) body += i ? ",0.25" : "0.25";
  return body + "]}]}";
}

// POSTs `body` to the server's REST `path` with curl; the HTTP status, and
// the response body in `*out`.
int RestPost(const std::string& http_address, const std::string& path, const std::string& body,
             const std::vector<std::string>& headers, std::string* out) {
  std::vector<std::string> argv = {"/usr/bin/curl",  "-s", "-o",   "-",  "-w",
                                   "\n%{http_code}", "-X", "POST", "-H", "Content-Type: application/json",
                                   "--data-binary",  body};
  for (const std::string& h : headers) {
    argv.push_back("-H");
    argv.push_back(h);
  }
  argv.push_back("http://" + http_address + path);
  std::string output;
  if (RunCommand(argv, &output) != 0) return -1;
  size_t cut = output.rfind('\n');
  if (out) *out = output.substr(0, cut);
  return std::atoi(output.substr(cut + 1).c_str());
}

// A metric's value from the server's /metrics (summed over its series
// matching `labels`); -1 when absent.
double MetricValue(const std::string& metrics_address, const std::string& name, const std::string& labels = "") {
  std::string text;
  if (RunCommand({"/usr/bin/curl", "-s", "http://" + metrics_address + "/metrics"}, &text) != 0) return -1;
  double sum = -1;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name, 0) != 0 ||
        (line.size() > name.size() && line[name.size()] != '{' && line[name.size()] != ' ')) {
      continue;
    }
    if (!labels.empty() && line.find(labels) == std::string::npos) continue;
    sum = std::max(sum, 0.0) + std::atof(line.substr(line.rfind(' ') + 1).c_str());
  }
  return sum;
}

class TracingTest : public ServerTest {
 protected:
  explicit TracingTest(OtlpReceiver::Protocol protocol = OtlpReceiver::Protocol::kGrpc)
      : receiver_(std::make_unique<OtlpReceiver>(true, protocol)) {}
  std::vector<std::string> ExtraArgs() const override {
    std::vector<std::string> args = {"--otlp-endpoint=http://" + receiver_->address(), "--trace-export-delay=50ms",
                                     "--service-name=infergate-under-test", "--log-level=debug",
                                     "--metrics-address=127.0.0.1:0"};
    for (const std::string& a : MoreArgs()) args.push_back(a);
    return args;
  }
  virtual std::vector<std::string> MoreArgs() const { return {}; }

  std::vector<Span> WaitForTrace(const std::string& trace_id) {
    return SpansOf(
        receiver_->WaitFor([&](const auto& all) { return Complete(all, trace_id); }, std::chrono::seconds(60)),
        trace_id);
  }

  // The children every answered call has, under its server span.
  void ExpectCallShape(const std::vector<Span>& spans, const Span& server, const std::string& device) {
    const std::string server_id = HexId(server.span_id());
    for (const char* name : {"infergate.admission", "infergate.decode", "infergate.attempt", "infergate.encode"}) {
      EXPECT_NE(Named(spans, name, server_id), nullptr) << name << " is not a child of the server span";
    }
    const Span* attempt = Named(spans, "infergate.attempt", server_id);
    ASSERT_NE(attempt, nullptr);
    EXPECT_EQ(Attribute(*attempt, "infergate.device"), device);
    const std::string attempt_id = HexId(attempt->span_id());
    for (const char* name : {"infergate.queue", "infergate.batch", "infergate.compute", "infergate.outputs"}) {
      const Span* child = Named(spans, name, attempt_id);
      ASSERT_NE(child, nullptr) << name << " is not a child of the attempt";
      EXPECT_GE(child->start_time_unix_nano(), attempt->start_time_unix_nano()) << name;
      EXPECT_LE(child->end_time_unix_nano(), attempt->end_time_unix_nano() + 1000) << name;
    }
    EXPECT_TRUE(HasAttribute(*Named(spans, "infergate.queue", attempt_id), "infergate.queue_us"));
    EXPECT_TRUE(HasAttribute(*Named(spans, "infergate.compute", attempt_id), "infergate.compute_us"));
    EXPECT_EQ(Attribute(*Named(spans, "infergate.compute", attempt_id), "infergate.dtype"), "FLOAT32");
    EXPECT_EQ(Attribute(server, "infergate.model"), "mlp");
    EXPECT_EQ(Attribute(server, "infergate.device"), device);
    EXPECT_EQ(Attribute(server, "infergate.device.requested"), "auto");
    EXPECT_EQ(Attribute(server, "infergate.model.version"), "1");
    EXPECT_TRUE(HasAttribute(server, "infergate.queue_us"));
    EXPECT_TRUE(HasAttribute(server, "infergate.compute_us"));
    // Every child lies within the server span.
    for (const Span& s : spans) {
      EXPECT_GE(s.start_time_unix_nano(), server.start_time_unix_nano()) << s.name();
      EXPECT_LE(s.end_time_unix_nano(), server.end_time_unix_nano() + 1000) << s.name();
    }
  }

  std::unique_ptr<OtlpReceiver> receiver_;
};

TEST_F(TracingTest, V1CallContinuesTheCallersTrace) {
  Caller caller = NewCaller();
  grpc::ClientContext ctx;
  ctx.AddMetadata("traceparent", caller.traceparent());
  ctx.AddMetadata("tracestate", "vendor=value");
  v1::InferResponse resp;
  ASSERT_TRUE(stub_->Infer(&ctx, Request("mlp", {{"x", at::randn({1, 256})}}), &resp).ok());

  std::vector<Span> spans = WaitForTrace(caller.trace_id);
  const Span* server = Named(spans, "infergate.v1.InferenceService/Infer");
  ASSERT_NE(server, nullptr) << "no server span for the caller's trace; got " << spans.size() << " spans";
  EXPECT_EQ(server->kind(), Span_SpanKind_SPAN_KIND_SERVER);
  EXPECT_EQ(HexId(server->parent_span_id()), caller.parent_id);
  EXPECT_EQ(server->trace_state(), "vendor=value");
  EXPECT_EQ(Attribute(*server, "rpc.system"), "grpc");
  EXPECT_EQ(Attribute(*server, "rpc.service"), "infergate.v1.InferenceService");
  EXPECT_EQ(Attribute(*server, "rpc.method"), "Infer");
  EXPECT_EQ(Attribute(*server, "rpc.grpc.status_code"), "0");
  ExpectCallShape(spans, *server, "cpu");
  // The resource names the service as configured.
  for (const ReceivedSpan& r : receiver_->Spans()) {
    bool named = false;
    for (const auto& kv : r.resource.attributes()) {
      named |= kv.key() == "service.name" && kv.value().string_value() == "infergate-under-test";
    }
    EXPECT_TRUE(named) << "a span's resource lacks service.name=infergate-under-test";
  }
  // The server's log line about the call carries the trace id.
  EXPECT_NE(server_->Log().find("trace_id=" + caller.trace_id), std::string::npos);
}

TEST_F(TracingTest, OpenInferenceGrpcCallContinuesTheCallersTrace) {
  Caller caller = NewCaller();
  auto v2 = inference::GRPCInferenceService::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.AddMetadata("traceparent", caller.traceparent());
  inference::ModelInferResponse resp;
  grpc::Status s = v2->ModelInfer(&ctx, MlpV2Request(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();

  std::vector<Span> spans = WaitForTrace(caller.trace_id);
  const Span* server = Named(spans, "inference.GRPCInferenceService/ModelInfer");
  ASSERT_NE(server, nullptr) << "got " << spans.size() << " spans";
  EXPECT_EQ(HexId(server->parent_span_id()), caller.parent_id);
  EXPECT_EQ(Attribute(*server, "rpc.method"), "ModelInfer");
  ExpectCallShape(spans, *server, "cpu");
}

TEST_F(TracingTest, OpenInferenceStreamRequestsEachContinueTheStreamsTrace) {
  Caller caller = NewCaller();
  auto v2 = inference::GRPCInferenceService::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.AddMetadata("traceparent", caller.traceparent());
  auto stream = v2->ModelStreamInfer(&ctx);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(stream->Write(MlpV2Request()));
  stream->WritesDone();
  inference::ModelStreamInferResponse resp;
  int answers = 0;
  while (stream->Read(&resp)) {
    EXPECT_TRUE(resp.error_message().empty()) << resp.error_message();
    ++answers;
  }
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(answers, 2);
  std::vector<ReceivedSpan> all = receiver_->WaitFor(
      [&](const auto& got) { return AllNamed(SpansOf(got, caller.trace_id), "infergate.encode").size() >= 2; },
      std::chrono::seconds(60));
  std::vector<Span> spans = SpansOf(all, caller.trace_id);
  std::vector<const Span*> servers = AllNamed(spans, "inference.GRPCInferenceService/ModelStreamInfer");
  ASSERT_EQ(servers.size(), 2u);
  for (const Span* server : servers) EXPECT_EQ(HexId(server->parent_span_id()), caller.parent_id);
}

TEST_F(TracingTest, RestCallContinuesTheCallersTrace) {
  Caller caller = NewCaller();
  std::string body;
  ASSERT_EQ(RestPost(server_->http_address(), "/v2/models/mlp/infer", MlpJsonBody(),
                     {"traceparent: " + caller.traceparent()}, &body),
            200)
      << body;
  std::vector<Span> spans = WaitForTrace(caller.trace_id);
  const Span* server = Named(spans, "POST /v2/models/{model_name}/infer");
  ASSERT_NE(server, nullptr) << "got " << spans.size() << " spans";
  EXPECT_EQ(server->kind(), Span_SpanKind_SPAN_KIND_SERVER);
  EXPECT_EQ(HexId(server->parent_span_id()), caller.parent_id);
  EXPECT_EQ(Attribute(*server, "http.request.method"), "POST");
  EXPECT_EQ(Attribute(*server, "http.route"), "/v2/models/{model_name}/infer");
  EXPECT_EQ(Attribute(*server, "url.path"), "/v2/models/mlp/infer");
  EXPECT_EQ(Attribute(*server, "http.response.status_code"), "200");
  ExpectCallShape(spans, *server, "cpu");
}

TEST_F(TracingTest, RefusedCallsAreTracedWithTheirStatus) {
  // A model that does not exist: refused by the core, a client error (not
  // an error span under the RPC conventions), with its code recorded.
  Caller unknown = NewCaller();
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("traceparent", unknown.traceparent());
    v1::InferResponse resp;
    EXPECT_EQ(stub_->Infer(&ctx, Request("no-such-model", {{"x", at::randn({1, 256})}}), &resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  std::vector<Span> spans =
      SpansOf(receiver_->WaitFor([&](const auto& all) { return !SpansOf(all, unknown.trace_id).empty(); },
                                 std::chrono::seconds(60)),
              unknown.trace_id);
  const Span* server = Named(spans, "infergate.v1.InferenceService/Infer");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(Attribute(*server, "rpc.grpc.status_code"), std::to_string(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(Attribute(*server, "error.type"), "NOT_FOUND");
  EXPECT_NE(server->status().code(), Status_StatusCode_STATUS_CODE_ERROR);
  EXPECT_NE(Named(spans, "infergate.admission"), nullptr);

  // REST with a malformed body: a 400 naming the field, traced as such.
  Caller bad = NewCaller();
  EXPECT_EQ(RestPost(server_->http_address(), "/v2/models/mlp/infer", R"({"inputs": 7})",
                     {"traceparent: " + bad.traceparent()}, nullptr),
            400);
  spans = SpansOf(receiver_->WaitFor([&](const auto& all) { return !SpansOf(all, bad.trace_id).empty(); },
                                     std::chrono::seconds(60)),
                  bad.trace_id);
  server = Named(spans, "POST /v2/models/{model_name}/infer");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(Attribute(*server, "http.response.status_code"), "400");
  const Span* decode = Named(spans, "infergate.decode");
  ASSERT_NE(decode, nullptr);
  EXPECT_EQ(decode->status().code(), Status_StatusCode_STATUS_CODE_ERROR);
}

TEST_F(TracingTest, CallsWithoutTraceContextStartTheirOwnTrace) {
  const uint64_t before = receiver_->spans_received();
  // None, and a malformed one (ignored, as W3C says).
  for (const char* traceparent : {"", "00-zzzz-1234-01"}) {
    grpc::ClientContext ctx;
    if (*traceparent) ctx.AddMetadata("traceparent", traceparent);
    v1::InferResponse resp;
    ASSERT_TRUE(stub_->Infer(&ctx, Request("mlp", {{"x", at::randn({1, 256})}}), &resp).ok());
  }
  std::vector<ReceivedSpan> all = receiver_->WaitFor(
      [&](const auto& got) {
        int roots = 0;
        for (const ReceivedSpan& r : got)
          roots += r.span.name() == "infergate.v1.InferenceService/Infer" && r.span.parent_span_id().empty();
        return roots >= 2;
      },
      std::chrono::seconds(60));
  std::set<std::string> root_traces;
  for (const ReceivedSpan& r : all) {
    if (r.span.name() == "infergate.v1.InferenceService/Infer" && r.span.parent_span_id().empty()) {
      root_traces.insert(HexId(r.span.trace_id()));
    }
  }
  EXPECT_EQ(root_traces.size(), 2u) << "each call starts a trace of its own";
  EXPECT_GT(receiver_->spans_received(), before);
}

// A caller whose trace is not sampled (flags 00): the call records nothing,
// and its log line still carries the caller's trace id. A sampled call
// after it shows the collector received what was sent by then.
TEST_F(TracingTest, AnUnsampledCallersTraceKeepsItsIdAndRecordsNothing) {
  const Caller unsampled = NewCaller();
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("traceparent", "00-" + unsampled.trace_id + "-" + unsampled.parent_id + "-00");
    v1::InferResponse resp;
    ASSERT_TRUE(stub_->Infer(&ctx, Request("mlp", {{"x", at::randn({1, 256})}}), &resp).ok());
  }
  const Caller sampled = NewCaller();
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("traceparent", sampled.traceparent());
    v1::InferResponse resp;
    ASSERT_TRUE(stub_->Infer(&ctx, Request("mlp", {{"x", at::randn({1, 256})}}), &resp).ok());
  }
  ASSERT_NE(Named(WaitForTrace(sampled.trace_id), "infergate.v1.InferenceService/Infer"), nullptr);
  EXPECT_TRUE(SpansOf(receiver_->Spans(), unsampled.trace_id).empty()) << "the unsampled call recorded spans";
  EXPECT_NE(server_->Log().find("trace_id=" + unsampled.trace_id), std::string::npos)
      << "the unsampled call's log line lacks the caller's trace id";
}

// Triton's trace extension over gRPC (TraceSetting) changes what is
// traced: a model's level OFF traces none of its calls, its rate 2 every
// other one, its count 1 just the next one; clearing a model's values
// gives it the global ones again. Each check ends with a call that is
// traced (the collector has what was sent before it).
TEST_F(TracingTest, TritonTraceSettingsChangeWhichCallsAreTraced) {
  auto v2 = inference::GRPCInferenceService::NewStub(channel_);
  auto setting = [&](const std::string& model, std::map<std::string, std::vector<std::string>> change) {
    inference::TraceSettingRequest req;
    req.set_model_name(model);
    for (const auto& [key, values] : change) {
      auto& value = (*req.mutable_settings())[key];
      for (const std::string& v : values) value.add_value(v);
    }
    grpc::ClientContext ctx;
    inference::TraceSettingResponse resp;
    grpc::Status s = v2->TraceSetting(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& [key, value] : resp.settings()) out[key] = {value.value().begin(), value.value().end()};
    return out;
  };
  // One call to mlp with a sampled caller's trace; its trace id.
  auto call = [&] {
    const Caller caller = NewCaller();
    grpc::ClientContext ctx;
    ctx.AddMetadata("traceparent", caller.traceparent());
    v1::InferResponse resp;
    EXPECT_TRUE(stub_->Infer(&ctx, Request("mlp", {{"x", at::randn({1, 256})}}), &resp).ok());
    return caller.trace_id;
  };
  auto traced = [&](const std::string& trace_id) { return !SpansOf(receiver_->Spans(), trace_id).empty(); };
  using Values = std::map<std::string, std::vector<std::string>>;
  const Values defaults = {{"trace_level", {"TIMESTAMPS"}},
                           {"trace_rate", {"1"}},
                           {"trace_count", {"-1"}},
                           {"trace_mode", {"opentelemetry"}}};
  EXPECT_EQ(setting("", {}), defaults);
  EXPECT_EQ(setting("mlp", {}), defaults) << "a model without its own values has the global ones";

  // Level OFF for mlp.
  Values off = defaults;
  off["trace_level"] = {"OFF"};
  EXPECT_EQ(setting("mlp", {{"trace_level", {"OFF"}}}), off);
  const std::string untraced = call();
  EXPECT_EQ(setting("mlp", {{"trace_level", {}}}), defaults) << "an empty value clears the model's own";
  ASSERT_NE(Named(WaitForTrace(call()), "infergate.v1.InferenceService/Infer"), nullptr);
  EXPECT_FALSE(traced(untraced)) << "a call of a model at level OFF was traced";

  // Rate 2: the first of every two calls.
  setting("mlp", {{"trace_rate", {"2"}}});
  std::vector<std::string> rated;
  for (int i = 0; i < 4; ++i) rated.push_back(call());
  setting("mlp", {{"trace_rate", {}}});
  ASSERT_NE(Named(WaitForTrace(call()), "infergate.v1.InferenceService/Infer"), nullptr);
  EXPECT_EQ(std::vector<bool>({traced(rated[0]), traced(rated[1]), traced(rated[2]), traced(rated[3])}),
            std::vector<bool>({true, false, true, false}));

  // Count 1: the next call only, and the count shows what is left.
  setting("mlp", {{"trace_count", {"1"}}});
  const std::string first = call(), second = call();
  EXPECT_EQ(setting("mlp", {})["trace_count"], std::vector<std::string>{"0"});
  setting("mlp", {{"trace_count", {}}});
  ASSERT_NE(Named(WaitForTrace(call()), "infergate.v1.InferenceService/Infer"), nullptr);
  EXPECT_TRUE(traced(first));
  EXPECT_FALSE(traced(second)) << "a call past the trace count was traced";

  // Refusals name the setting, in Triton's words where it has them.
  inference::TraceSettingRequest bad;
  (*bad.mutable_settings())["trace_rate"].add_value("fast");
  grpc::ClientContext ctx;
  inference::TraceSettingResponse resp;
  grpc::Status s = v2->TraceSetting(&ctx, bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("Unable to parse 'trace_rate', got: fast"), std::string::npos) << s.error_message();
  inference::TraceSettingRequest unknown;
  unknown.set_model_name("nosuch");
  grpc::ClientContext ctx2;
  s = v2->TraceSetting(&ctx2, unknown, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("Request for unknown model : 'nosuch'"), std::string::npos) << s.error_message();
}

// OTLP over HTTP (--otlp-protocol=http/protobuf): the same spans reach a
// collector that takes POSTs of protobuf at /v1/traces.
class TracingHttpTest : public TracingTest {
 protected:
  TracingHttpTest() : TracingTest(OtlpReceiver::Protocol::kHttpProtobuf) {}
  std::vector<std::string> MoreArgs() const override { return {"--otlp-protocol=http/protobuf"}; }
};

TEST_F(TracingHttpTest, SpansGoToAnHttpCollectorAsProtobuf) {
  const Caller caller = NewCaller();
  grpc::ClientContext ctx;
  ctx.AddMetadata("traceparent", caller.traceparent());
  v1::InferResponse resp;
  ASSERT_TRUE(stub_->Infer(&ctx, Request("mlp", {{"x", at::randn({1, 256})}}), &resp).ok());
  const std::vector<Span> spans = WaitForTrace(caller.trace_id);
  const Span* server = Named(spans, "infergate.v1.InferenceService/Infer");
  ASSERT_NE(server, nullptr) << "no server span reached the HTTP collector; posts: " << receiver_->HttpPosts().size();
  EXPECT_EQ(HexId(server->parent_span_id()), caller.parent_id);
  ExpectCallShape(spans, *server, "cpu");
  const std::vector<std::string> posts = receiver_->HttpPosts();
  ASSERT_FALSE(posts.empty());
  EXPECT_EQ(posts[0], "/v1/traces application/x-protobuf");
}

// Spans wait up to --trace-export-delay for their batch; a server that
// stops flushes them first, so a call answered just before SIGTERM still
// reaches the collector although its batch would only have gone out a
// minute later.
class TracingFlushTest : public TracingTest {
 protected:
  static constexpr std::chrono::seconds kExportDelay{60};
  std::vector<std::string> MoreArgs() const override {
    return {"--trace-export-delay=" + std::to_string(kExportDelay.count()) + "s"};
  }
  // Before the server starts: its exporter's first batch is due
  // kExportDelay after its start (the delay runs from the exporter's loop,
  // not from the call), so a stop that waited for that batch would end no
  // sooner than kExportDelay after this moment.
  void SetUp() override {
    launched_ = std::chrono::steady_clock::now();
    TracingTest::SetUp();
  }
  std::chrono::steady_clock::time_point launched_;
};

TEST_F(TracingFlushTest, SpansOfTheLastCallsAreFlushedWhenTheServerStops) {
  const Caller caller = NewCaller();
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("traceparent", caller.traceparent());
    v1::InferResponse resp;
    ASSERT_TRUE(stub_->Infer(&ctx, Request("mlp", {{"x", at::randn({1, 256})}}), &resp).ok());
  }
  EXPECT_TRUE(SpansOf(receiver_->Spans(), caller.trace_id).empty())
      << "exported before the stop: the delay is not 60 s";
  stub_.reset();
  channel_.reset();
  EXPECT_EQ(server_->Stop(), 0) << server_->Log();
  server_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - launched_, kExportDelay)
      << "the stop waited for the export delay instead of flushing";
  const std::vector<Span> spans = SpansOf(receiver_->Spans(), caller.trace_id);
  EXPECT_NE(Named(spans, "infergate.v1.InferenceService/Infer"), nullptr)
      << "the call's spans were not flushed at stop (" << spans.size() << " spans)";
}

// 1% of the calls without a caller's trace, here none at all: a caller's
// sampled trace is still followed.
class TracingRatioTest : public TracingTest {
 protected:
  std::vector<std::string> MoreArgs() const override {
    return {"--trace-sampler=parentbased_traceidratio", "--trace-sampler-arg=0"};
  }
};

TEST_F(TracingRatioTest, UnchosenRootCallsAreNotTracedAndCallersTracesAre) {
  for (int i = 0; i < 20; ++i) {
    v1::InferResponse resp;
    ASSERT_TRUE(Infer(Request("mlp", {{"x", at::randn({1, 256})}}), &resp).ok());
  }
  Caller caller = NewCaller();
  grpc::ClientContext ctx;
  ctx.AddMetadata("traceparent", caller.traceparent());
  v1::InferResponse resp;
  ASSERT_TRUE(stub_->Infer(&ctx, Request("mlp", {{"x", at::randn({1, 256})}}), &resp).ok());
  // The calls ended in order, and their spans are exported in the order
  // they ended: once the caller's trace is in, any root's would be.
  ASSERT_NE(Named(WaitForTrace(caller.trace_id), "infergate.v1.InferenceService/Infer"), nullptr);
  for (const ReceivedSpan& r : receiver_->Spans()) {
    EXPECT_EQ(HexId(r.span.trace_id()), caller.trace_id) << "a root call was traced: " << r.span.name();
  }
}

// Simulated MPS lacks max_pool2d: the demo cnn falls back to the CPU.
class TracingFallbackTest : public TracingTest {
 protected:
  std::vector<std::string> MoreArgs() const override {
    return {"--simulate-devices=mps", "--simulate-mps-unsupported-ops=aten::max_pool2d"};
  }
};

TEST_F(TracingFallbackTest, AFallbackFromMpsCarriesItsReason) {
  Caller caller = NewCaller();
  grpc::ClientContext ctx;
  ctx.AddMetadata("traceparent", caller.traceparent());
  v1::InferRequest req = Request("cnn", {{"image", at::randn({1, 3, 64, 64})}});
  req.set_device("mps");
  v1::InferResponse resp;
  grpc::Status s = stub_->Infer(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(resp.placement().fell_back());
  const std::string reason = resp.placement().fallback_reason();
  EXPECT_EQ(reason, "unsupported_op:aten::max_pool2d");

  std::vector<Span> spans =
      SpansOf(receiver_->WaitFor(
                  [&](const auto& all) {
                    return AllNamed(SpansOf(all, caller.trace_id), "infergate.attempt").size() >= 2 &&
                           Complete(all, caller.trace_id);
                  },
                  std::chrono::seconds(60)),
              caller.trace_id);
  const Span* server = Named(spans, "infergate.v1.InferenceService/Infer");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(Attribute(*server, "infergate.fallback_reason"), reason);
  EXPECT_EQ(Attribute(*server, "infergate.device.requested"), "mps");
  EXPECT_EQ(Attribute(*server, "infergate.device"), "cpu");
  EXPECT_EQ(Attribute(*server, "infergate.fell_back"), "true");
  bool event = false;
  for (const auto& e : server->events()) {
    if (e.name() != "infergate.fallback") continue;
    for (const auto& kv : e.attributes())
      event |= kv.key() == "infergate.fallback_reason" && kv.value().string_value() == reason;
  }
  EXPECT_TRUE(event) << "no infergate.fallback event with the reason on the server span";
  std::vector<const Span*> attempts = AllNamed(spans, "infergate.attempt");
  ASSERT_EQ(attempts.size(), 2u);
  std::sort(attempts.begin(), attempts.end(),
            [](const Span* a, const Span* b) { return a->start_time_unix_nano() < b->start_time_unix_nano(); });
  EXPECT_EQ(Attribute(*attempts[0], "infergate.device"), "mps");
  EXPECT_EQ(attempts[0]->status().code(), Status_StatusCode_STATUS_CODE_ERROR);
  EXPECT_NE(attempts[0]->status().message().find("max_pool2d"), std::string::npos) << attempts[0]->status().message();
  EXPECT_EQ(Attribute(*attempts[1], "infergate.device"), "cpu");
  EXPECT_EQ(Attribute(*attempts[1], "infergate.fallback_reason"), reason);
  EXPECT_NE(Named(spans, "infergate.compute", HexId(attempts[1]->span_id())), nullptr);
  // The log line about the retry names the trace.
  EXPECT_NE(server_->Log().find("on cpu after mps failed (" + reason + ") trace_id=" + caller.trace_id),
            std::string::npos)
      << server_->Log();
}

// Two models on a simulated GPU whose cache holds one of them: a request
// for the evicted one waits for its load, and its trace says so.
class TracingModelLoadTest : public TracingTest {
 protected:
  std::vector<std::string> MoreArgs() const override {
    return {"--simulate-devices=cuda:0", "--cache-budget=cuda:0=1.8MiB"};
  }
  v1::InferRequest OnCuda(const std::string& model) {
    v1::InferRequest req = model == "cnn" ? Request("cnn", {{"image", at::randn({1, 3, 64, 64})}})
                                          : Request("mlp", {{"x", at::randn({1, 256})}});
    req.set_device("cuda:0");
    req.set_precision(v1::FP32);  // cnn 0.35 MB + mlp 1.6 MB > 1.8 MiB
    // DENY: it waits for its model on cuda:0 (with fallback allowed, cnn,
    // evicted from there, would answer from its CPU copy).
    req.set_fallback(v1::DENY);
    return req;
  }
};

TEST_F(TracingModelLoadTest, ARequestThatWaitsForALoadHasAModelLoadSpan) {
  for (const char* model : {"cnn", "mlp"}) {  // mlp's load evicts cnn
    v1::InferResponse resp;
    ASSERT_TRUE(Infer(OnCuda(model), &resp).ok()) << model;
  }
  Caller loads = NewCaller();
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("traceparent", loads.traceparent());
    v1::InferResponse resp;
    ASSERT_TRUE(stub_->Infer(&ctx, OnCuda("cnn"), &resp).ok());
    EXPECT_EQ(resp.placement().device(), "cuda:0");
  }
  Caller resident = NewCaller();
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("traceparent", resident.traceparent());
    v1::InferResponse resp;
    ASSERT_TRUE(stub_->Infer(&ctx, OnCuda("cnn"), &resp).ok());
  }
  std::vector<Span> spans = WaitForTrace(loads.trace_id);
  const Span* attempt = Named(spans, "infergate.attempt");
  ASSERT_NE(attempt, nullptr);
  EXPECT_EQ(Attribute(*attempt, "infergate.device"), "cuda:0");
  const Span* load = Named(spans, "infergate.model_load", HexId(attempt->span_id()));
  ASSERT_NE(load, nullptr) << "the request waited for cnn to load, and its trace does not say so";
  EXPECT_EQ(Attribute(*load, "infergate.device"), "cuda:0");
  EXPECT_GT(load->end_time_unix_nano(), load->start_time_unix_nano());
  // The next request finds it resident: no load span.
  EXPECT_EQ(Named(WaitForTrace(resident.trace_id), "infergate.model_load"), nullptr);
  // Under auto, the attempt carries the ready path chosen and its estimate;
  // a request that named its device carries none.
  EXPECT_FALSE(HasAttribute(*attempt, "infergate.ready_path"));
  Caller routed = NewCaller();
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("traceparent", routed.traceparent());
    v1::InferRequest req = OnCuda("cnn");
    req.set_device("auto");
    req.set_fallback(v1::ALLOW);
    v1::InferResponse resp;
    ASSERT_TRUE(stub_->Infer(&ctx, req, &resp).ok());
  }
  spans = WaitForTrace(routed.trace_id);
  const Span* auto_attempt = Named(spans, "infergate.attempt");
  ASSERT_NE(auto_attempt, nullptr);
  const std::string path = Attribute(*auto_attempt, "infergate.ready_path");
  EXPECT_TRUE(path == "ideal" || path == "resident" || path == "load_and_run" || path == "cold_start") << path;
  EXPECT_TRUE(HasAttribute(*auto_attempt, "infergate.ready_path.expected_us"));
}

TEST_F(TracingTest, ABatchedRequestLinksToTheOtherRequestsOfItsBatch) {
  // Concurrent callers until some request shares a batch; each carries a
  // trace of its own.
  std::map<std::string, int> batch_size_of;  // trace id -> batch size the server reported
  std::mutex mu;
  for (int round = 0; round < 20; ++round) {
    std::vector<std::thread> clients;
    for (int c = 0; c < 24; ++c) {
      clients.emplace_back([&] {
        auto stub = v1::InferenceService::NewStub(channel_);
        Caller caller = NewCaller();
        grpc::ClientContext ctx;
        ctx.AddMetadata("traceparent", caller.traceparent());
        v1::InferResponse resp;
        if (stub->Infer(&ctx, Request("mlp", {{"x", at::randn({1, 256})}}), &resp).ok()) {
          std::lock_guard<std::mutex> lock(mu);
          batch_size_of[caller.trace_id] = static_cast<int>(resp.placement().batch_size());
        }
      });
    }
    for (auto& t : clients) t.join();
    if (std::any_of(batch_size_of.begin(), batch_size_of.end(), [](const auto& kv) { return kv.second > 1; })) break;
  }
  std::string batched;
  for (const auto& [trace, size] : batch_size_of) {
    if (size > 1) batched = trace;
  }
  ASSERT_FALSE(batched.empty()) << "no request ran in a batch larger than one";
  std::vector<Span> spans = WaitForTrace(batched);
  const Span* batch = Named(spans, "infergate.batch");
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(Attribute(*batch, "infergate.batch_size"), std::to_string(batch_size_of[batched]));
  const int requests = std::atoi(Attribute(*batch, "infergate.batch.requests").c_str());
  EXPECT_GE(requests, 2);
  ASSERT_EQ(batch->links_size(), requests - 1);
  for (const auto& link : batch->links()) {
    const std::string companion = HexId(link.trace_id());
    EXPECT_NE(companion, batched);
    EXPECT_EQ(batch_size_of.count(companion), 1u) << "a link to a trace no caller sent: " << companion;
    // The link points at the companion's server span.
    std::vector<Span> theirs = WaitForTrace(companion);
    const Span* their_server = nullptr;
    for (const Span& s : theirs) {
      if (s.kind() == Span_SpanKind_SPAN_KIND_SERVER) their_server = &s;
    }
    ASSERT_NE(their_server, nullptr);
    EXPECT_EQ(link.span_id(), their_server->span_id());
  }
}

// The export queue holds 64 spans (some six calls); a slow collector cannot
// hold requests.
class TracingSlowCollectorTest : public TracingTest {
 protected:
  std::vector<std::string> MoreArgs() const override { return {"--trace-queue-size=64"}; }

  // Median and worst latency of `n` sequential v1 calls, in microseconds.
  std::pair<int64_t, int64_t> Latencies(int n) {
    std::vector<int64_t> us;
    for (int i = 0; i < n; ++i) {
      Caller caller = NewCaller();
      grpc::ClientContext ctx;
      ctx.AddMetadata("traceparent", caller.traceparent());
      v1::InferResponse resp;
      auto start = std::chrono::steady_clock::now();
      EXPECT_TRUE(stub_->Infer(&ctx, Request("mlp", {{"x", at::randn({1, 256})}}), &resp).ok());
      us.push_back(
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(us.begin(), us.end());
    return {us[us.size() / 2], us.back()};
  }
};

TEST_F(TracingSlowCollectorTest, RequestsKeepTheirLatencyAndDroppedSpansAreCounted) {
  Latencies(20);  // warm
  const auto [fast_median, fast_worst] = Latencies(60);
  const std::string metrics = server_->metrics_address();
  // With a prompt collector, spans go out (some may be dropped on a loaded
  // machine: the queue is small).
  EXPECT_GT(MetricValue(metrics, "infergate_trace_spans_exported_total"), 0);
  const double full_before = MetricValue(metrics, "infergate_trace_spans_dropped_total", "queue_full");
  ASSERT_GE(full_before, 0);

  // A collector that takes 20 s per export: the exporter's thread waits
  // on it, and the queue fills.
  constexpr auto kCollectorDelay = std::chrono::seconds(20);
  receiver_->set_delay(kCollectorDelay);
  const auto [slow_median, slow_worst] = Latencies(60);
  EXPECT_LT(slow_median, 3 * fast_median + 20000)
      << "median latency with a slow collector " << slow_median << " us, with a prompt one " << fast_median << " us";
  EXPECT_LT(slow_worst, std::chrono::duration_cast<std::chrono::microseconds>(kCollectorDelay).count() / 4)
      << "a request waited for the collector";
  EXPECT_GT(MetricValue(metrics, "infergate_trace_spans_dropped_total", "queue_full"), full_before);

  // The collector gone: the same, and the spans its exports held are
  // counted as failed exports (not as the queue overflowing, which the
  // slow collector above already made happen).
  receiver_->Stop();
  const double failed_before = MetricValue(metrics, "infergate_trace_spans_dropped_total", "export_failed");
  const auto [gone_median, gone_worst] = Latencies(60);
  EXPECT_LT(gone_median, 3 * fast_median + 20000)
      << "median latency with no collector " << gone_median << " us, with a prompt one " << fast_median << " us";
  // Exports fail on the exporter's thread: wait for one (generously).
  double failed_after = failed_before;
  for (int i = 0; i < 300 && failed_after <= failed_before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    failed_after = MetricValue(metrics, "infergate_trace_spans_dropped_total", "export_failed");
  }
  EXPECT_GT(failed_after, failed_before) << "no export failed with the collector gone";
}

// A collector that takes the spans but never answers cannot hold the
// server's exit: the drain flush and the exporter's shutdown are bounded.
TEST_F(TracingSlowCollectorTest, AStoppingServerDoesNotWaitForACollectorThatNeverAnswers) {
  constexpr auto kCollectorDelay = std::chrono::minutes(10);
  receiver_->set_delay(kCollectorDelay);
  Latencies(30);
  // The export thread is now stuck in an export.
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       receiver_->exports() == 0 && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(receiver_->exports(), 0u);
  stub_.reset();
  channel_.reset();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(server_->Stop(), 0);
  const auto took = std::chrono::steady_clock::now() - start;
  server_.reset();
  // The flush waits at most 5 s, the shutdown 2 s, the gRPC grace 1 s; a
  // stop that waited for the collector would take its whole delay. The
  // bound is a tenth of that delay (a minute: room for a loaded machine
  // under sanitizers, and still nothing like waiting).
  EXPECT_LT(took, kCollectorDelay / 10);
}

}  // namespace
}  // namespace infergate::testing
