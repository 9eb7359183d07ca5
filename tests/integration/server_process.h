#pragma once
// Starts the real infergate binary on a loopback ephemeral port for a test,
// and makes the demo model repository it serves.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace infergate::testing {

class ServerProcess {
 public:
  // Runs the infergate binary with `args` plus --address=127.0.0.1:0, waits for its
  // "listening" line and for health to report SERVING. Fails the test
  // (returns nullptr) if that does not happen within `timeout`.
  // For a TLS server, `tls_ca` (and for mutual TLS the client pair) are the
  // PEM files the health check connects with.
  static std::unique_ptr<ServerProcess> Start(const std::vector<std::string>& args,
                                              std::chrono::seconds timeout = std::chrono::seconds(120),
                                              const std::string& tls_ca = "", const std::string& tls_cert = "",
                                              const std::string& tls_key = "");
  // Like Start, but returns once the server has printed its address, before
  // it is ready (its models may still be warming up).
  static std::unique_ptr<ServerProcess> Launch(const std::vector<std::string>& args,
                                               std::chrono::seconds timeout = std::chrono::seconds(120));
  ~ServerProcess();

  const std::string& address() const { return address_; }
  // HOST:PORT of /metrics ("" when the server runs without metrics).
  const std::string& metrics_address() const { return metrics_address_; }
  // HOST:PORT of the REST API ("" when the server runs without it).
  const std::string& http_address() const { return http_address_; }
  pid_t pid() const { return pid_; }
  bool Alive();
  // SIGTERM and wait; returns the exit status (or -1).
  int Stop();
  // Waits (up to `limit`, then SIGKILL) for an exit already under way;
  // returns the exit status (or -1).
  int WaitForExit(std::chrono::milliseconds limit = std::chrono::seconds(30));
  std::string Log() const;  // the server's stderr so far

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string address_;
  std::string metrics_address_;
  std::string http_address_;
  std::string dir_;  // holds the log; removed unless the test failed
  std::string log_path_;
};

// A figure in KiB from /proc/PID/status, e.g. "VmRSS:" (resident now) or
// "VmHWM:" (peak since start or since ResetPeakRss); 0 when unreadable.
uint64_t ProcStatusKib(pid_t pid, const char* field);
// Starts a new peak-RSS measurement for `pid` (Linux: writes 5 to clear_refs).
bool ResetPeakRss(pid_t pid);

// A temporary repository written by make-demo-models --with-test-models:
// a fresh copy for each test case (the first call in a case makes it),
// which the case may change. Thread-safe.
std::string DemoRepository();

// The server's /metrics text; "" when it has no metrics port or did not
// answer. (It runs curl: not for a process whose other threads may be
// inside OpenBLAS, whose fork handler can deadlock; see RestConnection.)
std::string ScrapeMetrics(const ServerProcess& server);

// The value of one series in a /metrics text, named exactly as the server
// writes it (labels in alphabetical order), e.g.
// `infergate_rejections_total{model="m",reason="queue_full"}`; NaN when the
// series is absent.
double MetricValue(const std::string& scrape, const std::string& series);

// How much a counter of `server` grew since the scrape `before` (an absent
// series counts as 0).
double AddedSince(const std::string& before, const ServerProcess& server, const std::string& series);

// How many times `what` occurs in `text` (a server's log, say), counting
// overlapping occurrences.
size_t Occurrences(const std::string& text, const std::string& what);

// Runs a command, returns its exit status and fills `output` with stdout.
int RunCommand(const std::vector<std::string>& argv, std::string* output);

}  // namespace infergate::testing
