#pragma once
// One keep-alive HTTP/1.1 connection to a server's REST (or metrics) port
// on loopback, for tests that send many requests from C++: a process per
// request, as with curl, would cost more than the server's answer, and a
// fork while other threads run OpenBLAS can deadlock in OpenBLAS's fork
// handler (it did, in the soak).
//
// Owned and used by one thread. A call on a connection the server closed
// reconnects once; a second failure answers status 0.

#include <string>

namespace infergate::testing {

struct RestAnswer {
  int status = 0;  // the HTTP status; 0 when no answer came
  std::string body;
};

class RestConnection {
 public:
  // `host_port` as ServerProcess::http_address() gives it ("127.0.0.1:N").
  explicit RestConnection(std::string host_port);
  ~RestConnection();
  RestConnection(const RestConnection&) = delete;
  RestConnection& operator=(const RestConnection&) = delete;

  // Sends `method path` with `body` as application/json (no body when
  // empty) and reads the whole answer (Content-Length framed, or to the
  // connection's close).
  RestAnswer Call(const std::string& method, const std::string& path, const std::string& body = "");

 private:
  bool Connect();
  void Close();
  bool SendAll(const std::string& bytes);
  // Reads one answer; false when the connection broke before it was whole.
  bool ReadAnswer(RestAnswer* answer);

  std::string host_port_;
  int fd_ = -1;
  std::string pending_;  // bytes read past the previous answer
};

}  // namespace infergate::testing
