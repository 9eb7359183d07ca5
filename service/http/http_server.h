#pragma once
// An HTTP/1.1 server for the REST API and /metrics, on Boost.Beast (asio).
//
// Event-driven: a connection that trickles bytes or sits idle costs a
// socket and a buffer, never a thread, so a few misbehaving clients cannot
// starve the rest. Limits: a whole-request deadline (from the moment the
// server waits for a request, keep-alive idle time included, to its last
// body byte; a trickle of bytes does not extend it), the same deadline for
// writing an answer, header and body size caps, and a cap on open
// connections (more are answered 503 and closed at once). TLS (and mutual
// TLS) with the certificate re-read when its files change.
//
// Threading and ownership: `threads` asio threads, each with an io_context
// of its own; a connection lives on one of them (given out in turn as
// connections are accepted), so one connection's work never runs on two
// threads at once. The handler is called on that thread, or, for a body of
// 256 KiB or more (whose decode would hold up the thread's other
// connections), on one of as many threads kept for large bodies; it must
// not block, and answers
// through the responder exactly once, from any thread (an answer after
// Shutdown is dropped). The server must outlive every responder: destroy it
// only once nothing can answer any more (after the core has shut down).
// Start, Shutdown and the destructor are called from one thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cancel_signal.h"

namespace infergate {

struct HttpRequest {
  std::string method;                                        // "GET", "POST", ...
  std::string path;                                          // the target before any '?'
  std::string query;                                         // after the '?', undecoded
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  // Fires when the client closes its connection (or it breaks) before the
  // answer is written: a handler subscribes to drop work nobody waits for.
  // A client that half-closes its side after sending counts as gone, as
  // with nginx. Set by the server (null in requests built elsewhere).
  std::shared_ptr<CancelSignal> client_gone;

  // The first header called `name` (lower case); "" when absent.
  absl::string_view Header(absl::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Kept until the answer is written (or dropped), then let go: what the
  // body counts against while it is held (an inference answer's share of
  // the in-flight budget). Null for most answers.
  std::shared_ptr<void> held;
};

using HttpResponder = std::function<void(HttpResponse)>;
// The request is shared so that what the handler builds over its body
// (tensors aliasing its bytes) can keep it alive until the answer.
using HttpHandler = std::function<void(std::shared_ptr<HttpRequest>, HttpResponder)>;
// Looks at a request's head (method, path, query, headers; no body yet)
// before its body is read, and returns the answer that refuses it, if any:
// a request without the token it needs is refused before it can make the
// server read (and hold) a large body. Called on an asio thread; must not
// block.
using HttpHeadScreen = std::function<std::optional<HttpResponse>(const HttpRequest& head)>;

struct HttpServerOptions {
  std::string address;    // HOST:PORT; port 0 picks one; IPv6 hosts in brackets
  std::string flag_name;  // for messages, e.g. "--http-address"
  int threads = 1;
  uint64_t max_body_bytes = 64 << 20;
  uint32_t max_header_bytes = 16 << 10;
  std::chrono::milliseconds request_timeout{30000};
  size_t max_connections = 1024;
  // Connections past max_connections, up to this many more, serve only
  // requests whose path starts with reserved_path_prefix (health probes):
  // clients holding every ordinary slot cannot make probes fail.
  size_t reserved_connections = 0;
  std::string reserved_path_prefix;
  std::string tls_cert;  // PEM chain; TLS when set (with tls_key)
  std::string tls_key;
  std::string tls_client_ca;  // PEM CA; clients must present a certificate it signed
};

class HttpServer {
 public:
  // Binds, starts the threads and serves. INVALID_ARGUMENT naming
  // `flag_name` for a bad address; UNAVAILABLE when it cannot listen.
  // `screen`, when set, sees each request's head before its body is read.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options, HttpHandler handler,
                                                           HttpHeadScreen screen = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  size_t open_connections() const;

  // Stops accepting and closes idle connections; answers in progress are
  // written (without keep-alive) until `deadline`, then the threads stop.
  void Shutdown(std::chrono::steady_clock::time_point deadline);

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "HTTP/1.1"-style reason phrase for the codes the servers send.
absl::string_view HttpReason(int status);

}  // namespace infergate
