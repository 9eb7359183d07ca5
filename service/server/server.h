#pragma once
// The server's parts, built in order and drained in order. main parses the
// flags, makes the process-wide settings (signals, allocator, log level)
// and calls this; tests start one in process.
//
//   Create      discovers devices, builds the core, the in-flight budget,
//               metrics, tokens, the front ends and every port (gRPC, REST,
//               metrics, ModelMesh), all bound; readiness NOT_SERVING,
//               liveness SERVING
//   StartCore   scans the repository and warms models up (blocks)
//   SetServing  readiness SERVING
//   Drain       readiness NOT_SERVING (liveness stays SERVING: a closed
//               port or a failing liveness probe would get the pod killed
//               mid-drain), new inference refused on every front end
//               (UNAVAILABLE, REST 503), accepted work finishes up to the
//               deadline; then gRPC sends GOAWAY and gives replies a
//               second, the ModelMesh port closes, REST writes what is
//               left, the core stops, and only then the HTTP server goes
//               (a REST answer can come until the core has stopped)
//
// Threading: Create, StartCore, SetServing and Drain are called once, in
// that order (SetServing may be skipped), from the thread that owns the
// server; the ports serve on their own threads meanwhile.

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "service/server/server_options.h"

namespace infergate {

class InferenceCore;

class Server {
 public:
  // `version` is the server's, for metadata and metrics. UNAVAILABLE when a
  // port cannot be bound; INVALID_ARGUMENT (or the file's error) for
  // options that cannot be served (token files, TLS files, addresses).
  static absl::StatusOr<std::unique_ptr<Server>> Create(const ServerOptions& options, const std::string& version);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  absl::Status StartCore();
  void SetServing();
  // True when every accepted request finished before `deadline`.
  bool Drain(std::chrono::steady_clock::time_point deadline);

  int port() const;
  int http_port() const;       // 0 when REST is off
  int metrics_port() const;    // 0 when metrics are off
  int modelmesh_port() const;  // 0 when the SPI is off or on a unix socket
  InferenceCore& core();

  struct Parts;

 private:
  explicit Server(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace infergate
