#include "service/http/http_server.h"

#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/caught_exception.h"
#include "common/client_text.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "service/http/chunked_with_length.h"

namespace infergate {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;

namespace {

constexpr char kServerName[] = "infergate";

std::string ErrorBody(absl::string_view message) {
  // Only for messages the server writes itself: no characters that need escaping.
  return absl::StrCat("{\"error\":\"", ForClients(message), "\"}");
}

// Identity of a file as it is now (inode, size, mtime); "" when missing.
std::string FileIdentity(const std::string& path) {
  struct stat st{};
  if (path.empty() || stat(path.c_str(), &st) != 0) return "";
  return absl::StrCat(st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
}

absl::StatusOr<std::shared_ptr<ssl::context>> MakeTlsContext(const HttpServerOptions& o) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                   ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(o.tls_cert, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--tls-cert: ", o.tls_cert, ": ", ec.message()));
  ctx->use_private_key_file(o.tls_key, ssl::context::pem, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--tls-key: ", o.tls_key, ": ", ec.message()));
  if (!o.tls_client_ca.empty()) {
    ctx->load_verify_file(o.tls_client_ca, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("--tls-client-ca: ", o.tls_client_ca, ": ", ec.message()));
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  return ctx;
}

absl::StatusOr<tcp::endpoint> ParseEndpoint(const std::string& address, const std::string& flag) {
  size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", address, "' is not HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code ec;
  net::ip::address ip = net::ip::make_address(host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat(flag, ": '", host, "' is not an IP address"));
  return tcp::endpoint(ip, static_cast<uint16_t>(port));
}

}  // namespace

absl::string_view HttpRequest::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return {};
}

absl::string_view HttpReason(int status) {
  auto reason = http::obsolete_reason(static_cast<http::status>(status));
  return absl::string_view(reason.data(), reason.size());
}

// A connection's streams run on their thread's io_context, by its concrete
// executor type: Asio's type-erased executor, copied and destroyed with
// every operation, was about 2.5% of a small REST request's CPU.
using ConnectionExecutor = net::io_context::executor_type;
using ConnectionSocket = net::basic_stream_socket<tcp, ConnectionExecutor>;
using PlainStream = beast::basic_stream<tcp, ConnectionExecutor>;
using TlsStream = beast::ssl_stream<PlainStream>;

// One connection's common part, so Shutdown can reach every session
// whatever its stream type.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Closes the connection if it is waiting for a request; runs on its
  // connection's thread.
  virtual void CloseIfIdle() = 0;
  virtual ConnectionExecutor executor() = 0;
};

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  HttpHeadScreen screen;  // may be empty
  // Declared before the io_context: sessions destroyed with it unregister here.
  Mutex sessions_mu;
  std::map<uint64_t, std::weak_ptr<SessionBase>> sessions ABSL_GUARDED_BY(sessions_mu);
  uint64_t next_session ABSL_GUARDED_BY(sessions_mu) = 0;
  std::atomic<size_t> connections{0};
  std::atomic<bool> stopping{false};
  // Answers are posted to the io_context only while it runs.
  Mutex run_mu;
  bool running ABSL_GUARDED_BY(run_mu) = true;

  Mutex tls_mu;
  std::shared_ptr<ssl::context> tls ABSL_GUARDED_BY(tls_mu);  // null: plaintext
  std::string tls_identity ABSL_GUARDED_BY(tls_mu);
  std::chrono::steady_clock::time_point next_tls_check ABSL_GUARDED_BY(tls_mu);

  // One io_context a thread, each run by its thread alone: a connection
  // lives on one of them, so its handlers never run at once and need no
  // strand (a strand's lock and its executor's reference counts were about
  // 5% of a small REST request's CPU). The acceptor is on the first and
  // hands connections out in turn.
  std::vector<std::unique_ptr<net::io_context>> contexts;
  size_t next_context = 0;  // the accept handler's alone
  // Keep the threads running while answers are awaited with no socket
  // operation pending (after the acceptor has closed, during Shutdown).
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{*contexts.front()};
  // Out of file descriptors, accept fails at once with the connection still
  // waiting: accepting again at once spins a core. Waits grow from 10 ms to
  // 1 s while that lasts. Only the accept handler (one at a time) touches
  // these; a pending wait is abandoned with the io_context at shutdown.
  net::steady_timer accept_backoff{*contexts.front()};
  std::chrono::milliseconds accept_wait{0};
  int port = 0;
  std::vector<std::thread> threads;
  // A request whose body is at least kLargeBodyBytes is handed to these
  // threads, not handled on its connection's: its decode (about 20 ms for
  // 4 MB of JSON numbers) would hold up every other connection of that
  // thread (measured: a small client's p99 4.5 -> 18 ms beside one
  // connection posting 4 MB bodies). Run by as many threads as the I/O
  // ones ("http large N" in top and traces), started by Start and joined by
  // Shutdown once the handlers handed over have finished.
  net::io_context large_bodies;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> large_bodies_work;
  std::vector<std::thread> large_body_threads;
  static constexpr size_t kLargeBodyBytes = 256 << 10;

  explicit Impl(int thread_count) : contexts(MakeContexts(thread_count)) {}

  static std::vector<std::unique_ptr<net::io_context>> MakeContexts(int count) {
    std::vector<std::unique_ptr<net::io_context>> made;
    for (int i = 0; i < std::max(1, count); ++i) made.push_back(std::make_unique<net::io_context>(1));
    return made;
  }
  // The context the next connection lives on.
  net::io_context& NextContext() {
    net::io_context& next = *contexts[next_context];
    next_context = (next_context + 1) % contexts.size();
    return next;
  }

  std::shared_ptr<ssl::context> CurrentTls();
  void Accept();
  void OnAccept(ConnectionSocket socket);
  uint64_t Register(std::weak_ptr<SessionBase> session) {
    MutexLock lock(sessions_mu);
    sessions[next_session] = std::move(session);
    return next_session++;
  }
  void Unregister(uint64_t id) {
    MutexLock lock(sessions_mu);
    sessions.erase(id);
  }
  // Runs `fn` on `executor` unless the server has stopped; true when posted.
  template <typename Fn>
  bool PostIfRunning(const ConnectionExecutor& executor, Fn&& fn) {
    MutexLock lock(run_mu);
    if (!running) return false;
    net::post(executor, std::forward<Fn>(fn));
    return true;
  }
};

namespace {

template <typename Stream>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  // `reserved`: a connection past the ordinary cap, which serves only the
  // reserved path prefix.
  Session(HttpServer::Impl& server, Stream stream, std::shared_ptr<ssl::context> tls, bool reserved)
      : server_(server), stream_(std::move(stream)), tls_(std::move(tls)), reserved_(reserved) {
    server_.connections.fetch_add(1);
  }
  ~Session() override {
    server_.Unregister(id_);
    server_.connections.fetch_sub(1);
  }

  // Registers the session for Shutdown and starts it on its connection's
  // thread (from the accepting one).
  static void Launch(std::shared_ptr<Session> session) {
    session->id_ = session->server_.Register(session);
    net::post(session->executor(), [session] { session->Start(); });
  }

  void CloseIfIdle() override {
    if (!busy_) Close();
  }
  ConnectionExecutor executor() override { return stream_.get_executor(); }

 private:
  // On the connection's thread, from Launch only: the TLS handshake, then
  // the first request.
  void Start() {
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      beast::get_lowest_layer(stream_).expires_after(server_.options.request_timeout);
      stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
        if (ec) return self->Close();
        self->ReadRequest();
      });
    } else {
      ReadRequest();
    }
  }

  void ReadRequest() {
    if (server_.stopping.load()) return Close();
    mended_ = false;
    NewParser();
    // buffer_ keeps what was read past the last request: the next pipelined
    // request, which this parser reads first. (Clearing it dropped those
    // requests, and left the rest of a body to be parsed as a request.)
    // One deadline for the whole request, however slowly its bytes come.
    beast::get_lowest_layer(stream_).expires_after(server_.options.request_timeout);
    // The head first: a request the screen refuses is answered before its
    // body is read.
    ReadHead();
  }
  void NewParser() {
    parser_.emplace();
    parser_->body_limit(server_.options.max_body_bytes);
    parser_->header_limit(server_.options.max_header_bytes);
  }
  void ReadHead() {
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHead(ec); });
  }

  // A head Beast refused for framing its body both ways, chunked and with a
  // length (chunked_with_length.h): parsed again, once, without its
  // Content-Length, and the connection closed after the answer. When Beast
  // refuses a field it has consumed the start line and the fields before
  // it (kept in its message), and the refused field and the rest are still
  // in the buffer: the head is written again from both. False for any
  // other head (refused as malformed, as before).
  bool MendChunkedWithLength(beast::error_code ec) {
    if (mended_ || (ec != http::error::bad_content_length && ec != http::error::bad_transfer_encoding)) return false;
    const auto& head = parser_->get();
    std::string fields;
    for (const auto& field : head) {
      absl::StrAppend(&fields, absl::string_view(field.name_string().data(), field.name_string().size()), ": ",
                      absl::string_view(field.value().data(), field.value().size()), "\r\n");
    }
    const auto unread = buffer_.data();
    fields.append(static_cast<const char*>(unread.data()), unread.size());
    std::optional<std::string> mended = DropLengthBesideChunked(fields);
    if (!mended) return false;
    const std::string start = absl::StrCat(absl::string_view(head.method_string().data(), head.method_string().size()),
                                           " ", absl::string_view(head.target().data(), head.target().size()), " HTTP/",
                                           head.version() / 10, ".", head.version() % 10, "\r\n");
    buffer_.consume(buffer_.size());
    const auto room = buffer_.prepare(start.size() + mended->size());
    std::memcpy(room.data(), start.data(), start.size());
    std::memcpy(static_cast<char*>(room.data()) + start.size(), mended->data(), mended->size());
    buffer_.commit(start.size() + mended->size());
    mended_ = true;
    NewParser();
    ReadHead();
    return true;
  }

  // Fills `out`'s method, path, query and headers from what the parser read.
  void FillHead(const http::request<http::string_body>& message, HttpRequest* out) {
    out->method = std::string(message.method_string());
    absl::string_view target(message.target().data(), message.target().size());
    size_t q = target.find('?');
    out->path = std::string(target.substr(0, q));
    if (q != absl::string_view::npos) out->query = std::string(target.substr(q + 1));
    for (const auto& field : message) {
      out->headers.emplace_back(
          absl::AsciiStrToLower(absl::string_view(field.name_string().data(), field.name_string().size())),
          std::string(field.value()));
    }
  }

  // Maps a read failure to its answer; true when it was handled (answered
  // or closed).
  bool ReadFailed(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      // Triton's words first (its clients and QA suite match them), for a
      // body of any kind; its size where the head gave it.
      std::optional<uint64_t> length;
      if (parser_ && parser_->content_length()) length = *parser_->content_length();
      Reject(413,
             absl::StrCat("request JSON size of ",
                          length ? absl::StrCat(*length) : absl::StrCat("more than ", server_.options.max_body_bytes),
                          " bytes exceeds the maximum allowed input size of ", server_.options.max_body_bytes,
                          " bytes (the request body is larger than the server's limit; "
                          "--max-receive-bytes raises it)"));
      return true;
    }
    if (ec == http::error::header_limit) {
      Reject(431, absl::StrCat("request headers are larger than ", server_.options.max_header_bytes, " bytes"));
      return true;
    }
    if (ec && ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      Reject(400, absl::StrCat("malformed HTTP request: ", ec.message()));
      return true;
    }
    if (ec) {
      Close();  // end of stream, timeout, reset, shutdown
      return true;
    }
    return false;
  }

  void OnHead(beast::error_code ec) {
    if (MendChunkedWithLength(ec)) return;
    if (ReadFailed(ec)) return;
    // A Transfer-Encoding that does not end in chunked leaves the body's
    // end unknown (RFC 9112, 6.3); Beast would read it by its length.
    if (parser_->get().count(http::field::transfer_encoding) > 0 && !parser_->chunked()) {
      parser_.reset();
      return Reject(400, "malformed HTTP request: a Transfer-Encoding must end in chunked");
    }
    if (reserved_) {
      absl::string_view target(parser_->get().target().data(), parser_->get().target().size());
      if (!absl::StartsWith(target, server_.options.reserved_path_prefix)) {
        parser_.reset();
        return Reject(503, absl::StrCat("too many connections; this one serves only ",
                                        server_.options.reserved_path_prefix, " requests; retry later"));
      }
    }
    if (server_.screen) {
      HttpRequest head;
      FillHead(parser_->get(), &head);
      std::optional<HttpResponse> refusal;
      if (absl::Status s = RunCatching("the request screen", [&] { refusal = server_.screen(head); }); !s.ok()) {
        parser_.reset();
        return Reject(500, std::string(s.message()));
      }
      if (refusal) {
        // The body may still be on its way: answer, then drain and close.
        keep_alive_ = false;
        linger_ = true;
        busy_ = true;
        parser_.reset();
        return Write(*std::move(refusal));
      }
    }
    if (parser_->is_done()) return OnRead({});
    ReserveForBody();
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  // Beast reads a body in pieces the size of the buffer's free room (at
  // least 512 bytes): a connection's buffer, sized by its head, read the
  // 74 KB of an Open Inference image body (the demo cnn's 12,288 floats) in
  // pieces of about a kilobyte, each a read with its timer and its
  // handler. A body larger than the room reads in pieces of up to
  // kBodyReadPiece, which the buffer holds until the request is in (at most
  // the body's own size again).
  void ReserveForBody() {
    const auto length = parser_->content_length_remaining();
    const size_t room = buffer_.capacity() - buffer_.size();
    if (!length || *length <= room) return;
    buffer_.reserve(buffer_.size() + static_cast<size_t>(std::min<uint64_t>(*length, kBodyReadPiece)));
  }
  static constexpr uint64_t kBodyReadPiece = 64 << 10;

  void OnRead(beast::error_code ec) {
    if (ReadFailed(ec)) return;
    http::request<http::string_body> message = parser_->release();
    parser_.reset();
    // An idle connection keeps no more buffer than its heads need.
    if (buffer_.size() == 0 && buffer_.capacity() > kBodyReadPiece / 8) buffer_.shrink_to_fit();
    // A mended head's connection closes after its answer (RFC 9112, 6.3).
    keep_alive_ = message.keep_alive() && !mended_;
    auto request = std::make_shared<HttpRequest>();
    FillHead(message, request.get());
    request->body = std::move(message.body());
    beast::get_lowest_layer(stream_).expires_never();
    busy_ = true;
    request->client_gone = client_gone_ = std::make_shared<CancelSignal>();
    WatchForHangUp();
    auto self = this->shared_from_this();
    // Answered at most once: a handler that throws after answering is not
    // answered again, one that throws before is answered 500.
    auto answered = std::make_shared<std::atomic<bool>>(false);
    HttpResponder respond = [self, answered](HttpResponse response) {
      if (answered->exchange(true)) return;
      auto shared = std::make_shared<HttpResponse>(std::move(response));
      self->server_.PostIfRunning(self->stream_.get_executor(), [self, shared] { self->Write(std::move(*shared)); });
    };
    if (request->body.size() >= HttpServer::Impl::kLargeBodyBytes) {
      net::post(server_.large_bodies, [&server = server_, request = std::move(request), respond]() mutable {
        Handle(server, std::move(request), respond);
      });
      return;
    }
    Handle(server_, std::move(request), respond);
  }

  // Runs the server's handler on `request`; what escapes it is answered 500.
  static void Handle(HttpServer::Impl& server, std::shared_ptr<HttpRequest> request, const HttpResponder& respond) {
    const std::string where = absl::StrCat(request->method, " ", request->path.substr(0, 128));
    const absl::Status escaped = RunCatching(where, [&] { server.handler(std::move(request), respond); });
    if (!escaped.ok()) {
      HttpResponse failure;
      failure.status = 500;
      failure.body = ErrorBody(std::string(escaped.message()));
      respond(std::move(failure));
    }
  }

  // While a request is being answered, watches its connection for the
  // client closing it (end of stream, or a reset), as nginx does, and then
  // fires the request's `client_gone`. Bytes that arrive instead (a
  // pipelined request) end the watch without a verdict; so does writing the
  // answer. Waiting for readability reads nothing.
  //
  // Writing the answer does not cancel the wait (a cancel wakes another
  // thread for every request): the wait stays pending and completes
  // harmlessly with the client's next bytes, as a stale generation or with
  // nothing watched.
  void WatchForHangUp() {
    if (buffer_.size() > 0) return;  // a pipelined request is already here
    watching_ = true;
    const uint64_t generation = ++watch_generation_;
    beast::get_lowest_layer(stream_).socket().async_wait(
        tcp::socket::wait_read, [self = this->shared_from_this(), generation](beast::error_code ec) {
          if (generation == self->watch_generation_) self->OnReadable(ec);
        });
  }
  void OnReadable(beast::error_code ec) {
    if (!watching_) return;  // the answer is being written
    watching_ = false;
    if (ec == net::error::operation_aborted) return;
    bool gone = static_cast<bool>(ec);
    if (!gone) {
      char byte;
      const ssize_t n =
          ::recv(beast::get_lowest_layer(stream_).socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return WatchForHangUp();
      gone = n <= 0;
    }
    if (gone && client_gone_) client_gone_->Fire();
  }
  void StopWatching() {
    client_gone_.reset();
    watching_ = false;
  }

  void Reject(int status, const std::string& message) {
    keep_alive_ = false;
    linger_ = true;
    busy_ = true;
    HttpResponse response;
    response.status = status;
    response.body = ErrorBody(message);
    Write(std::move(response));
  }

  void Write(HttpResponse response) {
    StopWatching();
    auto message = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(response.status), 11);
    message->set(http::field::server, kServerName);
    if (!response.content_type.empty()) message->set(http::field::content_type, response.content_type);
    for (auto& [name, value] : response.headers) message->set(name, value);
    message->body() = std::move(response.body);
    message->keep_alive(keep_alive_ && !server_.stopping.load());
    message->prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(server_.options.request_timeout);
    http::async_write(
        stream_, *message,
        [self = this->shared_from_this(), message, held = std::move(response.held)](beast::error_code ec, size_t) {
          self->busy_ = false;
          if (!ec && self->linger_) return self->LingeringClose();
          if (ec || !message->keep_alive()) return self->Close();
          self->ReadRequest();
        });
  }

  // After refusing a request whose body may still be arriving (413 and the
  // like): closing at once, with unread bytes in the socket, makes the
  // kernel answer with a reset, and a client still sending loses the
  // answer ("broken pipe" instead of the 413). So the sending side is
  // closed, and what the client still sends is read and dropped, for at
  // most kLingerTime and kLingerBytes, before the socket is closed.
  void LingeringClose() {
    beast::error_code ignored;
    auto& lowest = beast::get_lowest_layer(stream_);
    lowest.socket().shutdown(tcp::socket::shutdown_send, ignored);
    lowest.expires_after(kLingerTime);
    discard_ = std::make_unique<std::array<char, 16384>>();
    Discard();
  }
  void Discard() {
    beast::get_lowest_layer(stream_).async_read_some(net::buffer(*discard_),
                                                     [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                                                       self->discarded_ += n;
                                                       if (ec || self->discarded_ > kLingerBytes) return self->Close();
                                                       self->Discard();
                                                     });
  }
  static constexpr std::chrono::seconds kLingerTime{2};
  static constexpr size_t kLingerBytes = size_t{64} << 20;

  void Close() {
    beast::error_code ignored;
    auto& socket = beast::get_lowest_layer(stream_).socket();
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
  }

  HttpServer::Impl& server_;
  Stream stream_;
  std::shared_ptr<ssl::context> tls_;  // keeps the context this connection was made with
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  uint64_t id_ = 0;
  bool keep_alive_ = true;
  bool mended_ = false;                               // this request's head was mended (chunked with a length)
  bool busy_ = false;                                 // a request is being answered
  bool linger_ = false;                               // refused: drain what the client still sends before closing
  bool watching_ = false;                             // WatchForHangUp's wait is pending and current
  uint64_t watch_generation_ = 0;                     // of the current wait; older ones complete ignored
  std::shared_ptr<CancelSignal> client_gone_;         // of the request being answered
  const bool reserved_;                               // past the ordinary cap: serves only the reserved path prefix
  std::unique_ptr<std::array<char, 16384>> discard_;  // allocated only when lingering
  size_t discarded_ = 0;
};

}  // namespace

std::shared_ptr<ssl::context> HttpServer::Impl::CurrentTls() {
  if (options.tls_cert.empty()) return nullptr;
  MutexLock lock(tls_mu);
  auto now = std::chrono::steady_clock::now();
  if (now < next_tls_check) return tls;
  next_tls_check = now + std::chrono::seconds(5);
  std::string identity = absl::StrCat(FileIdentity(options.tls_cert), "|", FileIdentity(options.tls_key), "|",
                                      FileIdentity(options.tls_client_ca));
  if (identity == tls_identity) return tls;
  absl::StatusOr<std::shared_ptr<ssl::context>> fresh = MakeTlsContext(options);
  if (!fresh.ok()) {
    LOG_WARNING << options.flag_name << ": keeping the previous certificate: " << fresh.status().message();
  } else {
    if (tls) LOG_INFO << options.flag_name << ": serving the renewed TLS certificate";
    tls = *std::move(fresh);
  }
  tls_identity = identity;
  return tls;
}

void HttpServer::Impl::Accept() {
  acceptor.async_accept(NextContext(), [this](beast::error_code ec, ConnectionSocket socket) {
    if (!ec) OnAccept(std::move(socket));
    if (stopping.load() || !acceptor.is_open()) return;
    const bool out_of_descriptors = ec == net::error::no_descriptors || ec == net::error::no_buffer_space ||
                                    ec == net::error::no_memory || ec.value() == ENFILE;
    if (!out_of_descriptors) {
      accept_wait = std::chrono::milliseconds(0);
      return Accept();
    }
    if (accept_wait.count() == 0) {
      LOG_WARNING << options.flag_name << ": cannot accept connections (" << ec.message()
                  << "); retrying with waits of up to 1 s until descriptors are free";
    }
    accept_wait = std::clamp(accept_wait * 2, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
    accept_backoff.expires_after(accept_wait);
    accept_backoff.async_wait([this](beast::error_code) {
      if (!stopping.load() && acceptor.is_open()) Accept();
    });
  });
}

void HttpServer::Impl::OnAccept(ConnectionSocket socket) {
  const size_t open = connections.load();
  const bool reserved = open >= options.max_connections;
  if (open >= options.max_connections + options.reserved_connections) {
    // Over the cap: a short answer written without waiting, then close.
    static const std::string kBody = ErrorBody("too many connections; retry later");
    static const std::string kFull =
        absl::StrCat("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n",
                     "Content-Length: ", kBody.size(), "\r\n\r\n", kBody);
    beast::error_code ignored;
    socket.non_blocking(true, ignored);
    socket.write_some(net::buffer(kFull), ignored);
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    return;
  }
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  if (std::shared_ptr<ssl::context> ctx = CurrentTls()) {
    auto session =
        std::make_shared<Session<TlsStream>>(*this, TlsStream(PlainStream(std::move(socket)), *ctx), ctx, reserved);
    Session<TlsStream>::Launch(std::move(session));
  } else {
    auto session = std::make_shared<Session<PlainStream>>(*this, PlainStream(std::move(socket)), nullptr, reserved);
    Session<PlainStream>::Launch(std::move(session));
  }
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

namespace {

// A thread's body: named `name` (top, traces), it runs `context` until it
// runs out of work. An exception that escapes a handler leaves run(); it is
// logged and counted as `what`, and the thread serves on.
std::function<void()> RunNamed(net::io_context& context, std::string name, const char* what) {
  return [&context, name = std::move(name), what] {
    NameThisThread(name);
    for (;;) {
      if (RunCatching(what, [&context] { context.run(); }).ok()) break;
    }
  };
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options, HttpHandler handler,
                                                              HttpHeadScreen screen) {
  ASSIGN_OR_RETURN(tcp::endpoint endpoint, ParseEndpoint(options.address, options.flag_name));
  const int threads = std::max(1, options.threads);
  auto impl = std::make_unique<Impl>(threads);
  impl->options = std::move(options);
  impl->handler = std::move(handler);
  impl->screen = std::move(screen);
  if (!impl->options.tls_cert.empty()) {
    absl::StatusOr<std::shared_ptr<ssl::context>> tls = MakeTlsContext(impl->options);
    if (!tls.ok()) return tls.status();
    MutexLock lock(impl->tls_mu);  // nothing else runs yet; the analysis asks for it
    impl->tls = *std::move(tls);
    impl->tls_identity = absl::StrCat(FileIdentity(impl->options.tls_cert), "|", FileIdentity(impl->options.tls_key),
                                      "|", FileIdentity(impl->options.tls_client_ca));
    impl->next_tls_check = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  }
  beast::error_code ec;
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat(impl->options.flag_name, ": cannot listen on ", impl->options.address, ": ", ec.message()));
  }
  impl->port = impl->acceptor.local_endpoint().port();
  // Before the first connection can be accepted: every request finds it.
  impl->large_bodies_work.emplace(net::make_work_guard(impl->large_bodies));
  for (int i = 0; i < threads; ++i) {
    impl->large_body_threads.emplace_back(
        RunNamed(impl->large_bodies, absl::StrCat("http large ", i), "an HTTP large-body handler"));
  }
  impl->Accept();
  for (auto& context : impl->contexts) impl->work.push_back(net::make_work_guard(*context));
  Impl* raw = impl.get();
  for (int i = 0; i < threads; ++i) {
    // std::thread's default stack (8 MiB), not a library's small fixed one:
    // LibTorch's thread-local storage needs more than civetweb's 100 KiB.
    raw->threads.emplace_back(RunNamed(*raw->contexts[i], absl::StrCat("http ", i), "an HTTP I/O handler"));
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->port; }

size_t HttpServer::open_connections() const { return impl_->connections.load(); }

void HttpServer::Shutdown(std::chrono::steady_clock::time_point deadline) {
  if (impl_->threads.empty()) return;
  impl_->stopping.store(true);
  net::post(impl_->acceptor.get_executor(), [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
  });
  std::vector<std::shared_ptr<SessionBase>> live;
  {
    MutexLock lock(impl_->sessions_mu);
    for (auto& [id, weak] : impl_->sessions) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) net::post(s->executor(), [s] { s->CloseIfIdle(); });
  live.clear();
  while (impl_->connections.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    MutexLock lock(impl_->run_mu);
    impl_->running = false;
  }
  impl_->work.clear();
  for (auto& context : impl_->contexts) context->stop();
  for (std::thread& t : impl_->threads) t.join();
  // Handlers already handed over finish (they must not block); their
  // answers are dropped, as the I/O threads have stopped.
  impl_->large_bodies_work.reset();
  for (std::thread& t : impl_->large_body_threads) t.join();
  impl_->large_body_threads.clear();
  impl_->threads.clear();
}

HttpServer::~HttpServer() { Shutdown(std::chrono::steady_clock::now()); }

}  // namespace infergate
