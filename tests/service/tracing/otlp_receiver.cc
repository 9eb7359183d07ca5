#include "tests/service/tracing/otlp_receiver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace infergate::testing {

namespace collector = opentelemetry::proto::collector::trace::v1;

OtlpReceiver::OtlpReceiver(bool keep_spans, Protocol protocol) : keep_spans_(keep_spans) {
  if (protocol == Protocol::kHttpProtobuf) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listen_fd_, 64) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error(std::string("OTLP HTTP receiver: ") + std::strerror(errno));
    }
    address_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    acceptor_ = std::thread([this] { AcceptHttp(); });
    return;
  }
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
  std::vector<std::thread> connections;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    connections.swap(connections_);
  }
  delay_ms_.store(0);
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
  }
  if (acceptor_.joinable()) acceptor_.join();
  for (std::thread& t : connections) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void OtlpReceiver::AcceptHttp() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
    }
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) {
      ::close(fd);
      return;
    }
    connections_.emplace_back([this, fd] { ServeHttpConnection(fd); });
  }
}

// One keep-alive connection: POSTs with a Content-Length body, each
// answered 200 with an empty ExportTraceServiceResponse, until the client
// closes it or the receiver stops.
void OtlpReceiver::ServeHttpConnection(int fd) {
  std::string in;
  auto stopped = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_;
  };
  auto fill = [&]() -> bool {  // reads more into `in`; false at the end
    for (;;) {
      if (stopped()) return false;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[65536];
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) return false;
      in.append(buf, n);
      return true;
    }
  };
  for (;;) {
    size_t head_end;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return (void)::close(fd);
    }
    std::string head = in.substr(0, head_end);
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t length = 0;
    if (size_t at = head.find("\r\ncontent-length:"); at != std::string::npos) {
      length = std::strtoul(head.c_str() + at + 17, nullptr, 10);
    }
    std::string type;
    if (size_t at = head.find("\r\ncontent-type:"); at != std::string::npos) {
      const size_t end = head.find("\r\n", at + 2);
      type = head.substr(at + 15, end == std::string::npos ? std::string::npos : end - at - 15);
      type.erase(0, type.find_first_not_of(' '));
    }
    const std::string path = in.substr(in.find(' ') + 1, in.find(' ', in.find(' ') + 1) - in.find(' ') - 1);
    while (in.size() < head_end + 4 + length) {
      if (!fill()) return (void)::close(fd);
    }
    collector::ExportTraceServiceRequest request;
    const bool parsed = request.ParseFromArray(in.data() + head_end + 4, static_cast<int>(length));
    in.erase(0, head_end + 4 + length);
    {
      std::lock_guard<std::mutex> lock(mu_);
      http_posts_.push_back(path + " " + type);
    }
    if (parsed) Record(request, stopped);
    const std::string answer =
        parsed ? "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"
               : "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    if (::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(answer.size())) {
      return (void)::close(fd);
    }
  }
}

std::vector<std::string> OtlpReceiver::HttpPosts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return http_posts_;
}

grpc::Status OtlpReceiver::Export(grpc::ServerContext* ctx, const collector::ExportTraceServiceRequest* request,
                                  collector::ExportTraceServiceResponse*) {
  Record(*request, [ctx] { return ctx->IsCancelled(); });
  return grpc::Status::OK;
}

void OtlpReceiver::Record(const collector::ExportTraceServiceRequest& request, const std::function<bool()>& cancelled) {
  exports_++;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms_.load());
       std::chrono::steady_clock::now() < until && !cancelled() && delay_ms_.load() > 0;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  uint64_t n = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& resource_spans : request.resource_spans()) {
    for (const auto& scope_spans : resource_spans.scope_spans()) {
      for (const auto& span : scope_spans.spans()) {
        ++n;
        if (keep_spans_) spans_.push_back({span, resource_spans.resource()});
      }
    }
  }
  received_ += n;
  arrived_.notify_all();
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
