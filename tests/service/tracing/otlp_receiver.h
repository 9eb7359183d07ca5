#pragma once
// A real OTLP trace receiver for tests and the benchmark, on a loopback
// ephemeral port, built from the OTLP protos Debian ships: a gRPC server
// for opentelemetry.proto.collector.trace.v1.TraceService, or (OTLP's
// http/protobuf) an HTTP/1.1 server taking POSTs of a serialised
// ExportTraceServiceRequest. It keeps every span it is sent (or only
// counts them), and can be told to answer slowly or to refuse, like a
// collector under pressure.
//
// Threading: Export runs on gRPC's threads, HTTP posts on a thread per
// connection; every accessor may be called from any thread.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "opentelemetry/proto/collector/trace/v1/trace_service.grpc.pb.h"

namespace infergate::testing {

// One span as exported, with its resource's attributes.
struct ReceivedSpan {
  opentelemetry::proto::trace::v1::Span span;
  opentelemetry::proto::resource::v1::Resource resource;
};

class OtlpReceiver final : public opentelemetry::proto::collector::trace::v1::TraceService::Service {
 public:
  enum class Protocol { kGrpc, kHttpProtobuf };
  // `keep_spans` false: only count them (the benchmark's sink).
  explicit OtlpReceiver(bool keep_spans = true, Protocol protocol = Protocol::kGrpc);
  ~OtlpReceiver() override;

  // "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  // Stops answering: the port closes (a collector gone).
  void Stop();

  // Each Export waits this long before it answers (a slow collector).
  void set_delay(std::chrono::milliseconds delay) { delay_ms_.store(delay.count()); }

  uint64_t spans_received() const { return received_.load(); }
  uint64_t exports() const { return exports_.load(); }
  // Over HTTP: the paths and content types of the POSTs taken, in order.
  std::vector<std::string> HttpPosts() const;
  std::vector<ReceivedSpan> Spans() const;
  // Waits up to `timeout` until `done(spans so far)` holds; returns the
  // spans then (whether or not it held).
  std::vector<ReceivedSpan> WaitFor(const std::function<bool(const std::vector<ReceivedSpan>&)>& done,
                                    std::chrono::milliseconds timeout) const;

  grpc::Status Export(grpc::ServerContext* ctx,
                      const opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest* request,
                      opentelemetry::proto::collector::trace::v1::ExportTraceServiceResponse* response) override;

 private:
  // Counts and keeps one export's spans, after the delay.
  void Record(const opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest& request,
              const std::function<bool()>& cancelled);
  void AcceptHttp();
  void ServeHttpConnection(int fd);

  const bool keep_spans_;
  std::unique_ptr<grpc::Server> server_;
  int listen_fd_ = -1;  // HTTP only
  std::thread acceptor_;
  std::vector<std::thread> connections_;  // under mu_
  std::vector<std::string> http_posts_;   // under mu_
  std::string address_;
  std::atomic<int64_t> delay_ms_{0};
  std::atomic<uint64_t> received_{0};
  std::atomic<uint64_t> exports_{0};
  mutable std::mutex mu_;
  mutable std::condition_variable arrived_;
  std::vector<ReceivedSpan> spans_;
  bool stopped_ = false;
};

// Helpers over exported spans.
std::string HexId(const std::string& bytes);
// The attribute `key` of `span` as text (ints and bools printed); "" when absent.
std::string Attribute(const opentelemetry::proto::trace::v1::Span& span, const std::string& key);
bool HasAttribute(const opentelemetry::proto::trace::v1::Span& span, const std::string& key);

}  // namespace infergate::testing
