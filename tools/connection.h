#pragma once
// How the CLI and the load tool reach a server: plaintext or TLS (with a
// client certificate for mutual TLS), a bearer token, and a load-balancing
// policy for dns:/// targets that resolve to several replicas.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace infergate::tools {

struct Connection {
  std::string address = "127.0.0.1:50051";  // also dns:///host:port
  std::string tls_ca;                       // PEM file; TLS when set
  std::string tls_cert;                     // PEM client certificate (mutual TLS)
  std::string tls_key;                      // PEM client key
  std::string tls_server_name;              // overrides the name checked in the server certificate
  std::string token;                        // bearer token
  std::string lb;                           // e.g. "round_robin"
};

// A channel; `lane` > 0 makes a separate connection (load tool).
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const Connection& c, int lane = 0);
// `count` (at least one) channels, each a connection of its own.
absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> MakeChannels(const Connection& c, int count);
// Adds the bearer token, if any.
void Authorize(grpc::ClientContext& ctx, const Connection& c);

}  // namespace infergate::tools
