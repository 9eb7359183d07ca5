#pragma once
// A minimal HTTP/1.1 endpoint serving GET /metrics in Prometheus text format.
//
// Why not prometheus-cpp's Exposer: it runs on civetweb, which Debian builds
// with a fixed small thread stack; LibTorch's static thread-local storage is
// larger than that, so civetweb cannot start a single worker thread in a
// process that has LibTorch loaded (pthread_create fails with EINVAL).

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/collectable.h>

#include "absl/status/statusor.h"

namespace infergate {

class MetricsHttpServer {
 public:
  // Listens on "HOST:PORT" (port 0 picks one). IPv6 hosts in brackets.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& address, std::vector<std::weak_ptr<prometheus::Collectable>> collectables);
  ~MetricsHttpServer();

  int port() const { return port_; }

 private:
  MetricsHttpServer() = default;
  void Loop();
  void Serve(int fd);
  std::string Render() const;

  std::vector<std::weak_ptr<prometheus::Collectable>> collectables_;
  int listen_fd_ = -1;
  int wake_fd_[2] = {-1, -1};
  int port_ = 0;
  std::thread thread_;
};

}  // namespace infergate
