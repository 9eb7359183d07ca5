#include "tests/tracing/otlp_receiver.h"

#include <thread>

namespace infergate::testing {

namespace collector = opentelemetry::proto::collector::trace::v1;

OtlpReceiver::OtlpReceiver(bool keep_spans) : keep_spans_(keep_spans) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(this);
  builder.SetMaxReceiveMessageSize(64 << 20);
  server_ = builder.BuildAndStart();
  address_ = "127.0.0.1:" + std::to_string(port);
}

OtlpReceiver::~OtlpReceiver() { Stop(); }

void OtlpReceiver::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  delay_ms_.store(0);
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
}

grpc::Status OtlpReceiver::Export(grpc::ServerContext* ctx, const collector::ExportTraceServiceRequest* request,
                                  collector::ExportTraceServiceResponse*) {
  exports_++;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms_.load());
       std::chrono::steady_clock::now() < until && !ctx->IsCancelled() && delay_ms_.load() > 0;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  uint64_t n = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& resource_spans : request->resource_spans()) {
    for (const auto& scope_spans : resource_spans.scope_spans()) {
      for (const auto& span : scope_spans.spans()) {
        ++n;
        if (keep_spans_) spans_.push_back({span, resource_spans.resource()});
      }
    }
  }
  received_ += n;
  arrived_.notify_all();
  return grpc::Status::OK;
}

std::vector<ReceivedSpan> OtlpReceiver::Spans() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spans_;
}

std::vector<ReceivedSpan> OtlpReceiver::WaitFor(const std::function<bool(const std::vector<ReceivedSpan>&)>& done,
                                                std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  arrived_.wait_for(lock, timeout, [&] { return done(spans_); });
  return spans_;
}

std::string HexId(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex.push_back(digits[c >> 4]);
    hex.push_back(digits[c & 15]);
  }
  return hex;
}

std::string Attribute(const opentelemetry::proto::trace::v1::Span& span, const std::string& key) {
  for (const auto& kv : span.attributes()) {
    if (kv.key() != key) continue;
    const auto& v = kv.value();
    if (v.has_string_value()) return v.string_value();
    if (v.has_int_value()) return std::to_string(v.int_value());
    if (v.has_bool_value()) return v.bool_value() ? "true" : "false";
    if (v.has_double_value()) return std::to_string(v.double_value());
    return "?";
  }
  return "";
}

bool HasAttribute(const opentelemetry::proto::trace::v1::Span& span, const std::string& key) {
  for (const auto& kv : span.attributes()) {
    if (kv.key() == key) return true;
  }
  return false;
}

}  // namespace infergate::testing
