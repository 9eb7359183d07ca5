#include "service/metrics_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <prometheus/text_serializer.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace infergate {
namespace {

constexpr size_t kMaxRequestBytes = 8192;
constexpr int kReadTimeoutMs = 2000;

void WriteAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

std::string Response(int code, const char* reason, const std::string& type, const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, std::vector<std::weak_ptr<prometheus::Collectable>> collectables) {
  size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics-address: '", address, "' is not HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  bool v6 = !host.empty() && host.front() == '[';
  if (v6) host = host.substr(1, host.size() - 2);
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET6, host.c_str(), &a->sin6_addr) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("--metrics-address: bad IPv6 host '", host, "'"));
    }
    len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    if (host.empty() || host == "*") {
      a->sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (host == "localhost") {
      a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else if (inet_pton(AF_INET, host.c_str(), &a->sin_addr) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("--metrics-address: bad IPv4 host '", host, "'"));
    }
    len = sizeof(*a);
  }
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer());
  s->collectables_ = std::move(collectables);
  s->listen_fd_ = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(s->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (s->listen_fd_ < 0 || ::bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(s->listen_fd_, 64) != 0) {
    return absl::UnavailableError(
        absl::StrCat("--metrics-address: cannot listen on ", address, ": ", std::strerror(errno)));
  }
  ::getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  s->port_ = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (::pipe2(s->wake_fd_, O_CLOEXEC) != 0) return absl::InternalError("metrics: pipe failed");
  s->thread_ = std::thread([raw = s.get()] { raw->Loop(); });
  return s;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (wake_fd_[1] >= 0) {
    char c = 0;
    (void)!::write(wake_fd_[1], &c, 1);
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : {listen_fd_, wake_fd_[0], wake_fd_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

void MetricsHttpServer::Loop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Serve(fd);
    ::close(fd);
  }
}

void MetricsHttpServer::Serve(int fd) {
  std::string request;
  char buf[1024];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, kReadTimeoutMs) <= 0) return;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return;
    request.append(buf, static_cast<size_t>(n));
  }
  size_t sp1 = request.find(' ');
  size_t sp2 = sp1 == std::string::npos ? std::string::npos : request.find(' ', sp1 + 1);
  if (sp2 == std::string::npos) {
    WriteAll(fd, Response(400, "Bad Request", "text/plain", "bad request\n"));
    return;
  }
  std::string method = request.substr(0, sp1);
  std::string path = request.substr(sp1 + 1, sp2 - sp1 - 1);
  if (size_t q = path.find('?'); q != std::string::npos) path.resize(q);
  if (method != "GET" && method != "HEAD") {
    WriteAll(fd, Response(405, "Method Not Allowed", "text/plain", "only GET\n"));
  } else if (path == "/metrics") {
    std::string body = Render();
    std::string resp = Response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", body);
    if (method == "HEAD") resp.resize(resp.size() - body.size());
    WriteAll(fd, resp);
  } else if (path == "/") {
    WriteAll(fd, Response(200, "OK", "text/html", "<html><body><a href=\"/metrics\">/metrics</a></body></html>\n"));
  } else {
    WriteAll(fd, Response(404, "Not Found", "text/plain", "not found; try /metrics\n"));
  }
}

std::string MetricsHttpServer::Render() const {
  std::vector<prometheus::MetricFamily> families;
  for (const auto& weak : collectables_) {
    if (auto c = weak.lock()) {
      std::vector<prometheus::MetricFamily> more = c->Collect();
      families.insert(families.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    }
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace infergate
