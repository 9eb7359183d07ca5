#include "tests/integration/rest_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace infergate::testing {

RestConnection::RestConnection(std::string host_port) : host_port_(std::move(host_port)) {}

RestConnection::~RestConnection() { Close(); }

bool RestConnection::Connect() {
  const size_t colon = host_port_.rfind(':');
  if (colon == std::string::npos) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(host_port_.c_str() + colon + 1)));
  if (inet_pton(AF_INET, host_port_.substr(0, colon).c_str(), &addr.sin_addr) != 1) return false;
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return false;
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  timeval timeout{60, 0};  // a wedged server fails the call, not the test run
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Close();
    return false;
  }
  return true;
}

void RestConnection::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  pending_.clear();
}

bool RestConnection::SendAll(const std::string& bytes) {
  for (size_t sent = 0; sent < bytes.size();) {
    ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool RestConnection::ReadAnswer(RestAnswer* answer) {
  auto fill = [&] {
    char buf[16384];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    pending_.append(buf, static_cast<size_t>(n));
    return true;
  };
  size_t head_end;
  while ((head_end = pending_.find("\r\n\r\n")) == std::string::npos) {
    if (!fill()) return false;
  }
  const std::string head = pending_.substr(0, head_end);
  if (head.compare(0, 9, "HTTP/1.1 ") != 0) return false;
  answer->status = std::atoi(head.c_str() + 9);
  size_t length = 0;
  bool framed = false;
  for (size_t line = head.find("\r\n"); line != std::string::npos; line = head.find("\r\n", line + 2)) {
    if (strncasecmp(head.c_str() + line + 2, "content-length:", 15) == 0) {
      length = std::strtoul(head.c_str() + line + 17, nullptr, 10);
      framed = true;
    }
  }
  const size_t body_start = head_end + 4;
  if (!framed) {  // the body ends where the server closes the connection
    while (fill()) {
    }
    answer->body = pending_.substr(body_start);
    Close();
    return true;
  }
  while (pending_.size() < body_start + length) {
    if (!fill()) return false;
  }
  answer->body = pending_.substr(body_start, length);
  pending_.erase(0, body_start + length);
  return true;
}

RestAnswer RestConnection::Call(const std::string& method, const std::string& path, const std::string& body) {
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: " + host_port_ + "\r\n";
  if (!body.empty()) request += "Content-Type: application/json\r\n";
  request += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (fd_ < 0 && !Connect()) continue;
    RestAnswer answer;
    if (SendAll(request) && ReadAnswer(&answer)) return answer;
    Close();  // closed by the server (idle keep-alive): once more on a new connection
  }
  return RestAnswer{};
}

}  // namespace infergate::testing
