// infergate server entry point: parses the flags, makes the process-wide
// settings (log level, allocator, open-file limit, stop signals), and runs
// a Server (server.h) until SIGTERM/SIGINT, then drains it.

#include <signal.h>
#include <sys/resource.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <chrono>
#include <cstdio>
#include <future>
#include <iostream>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/cpu_policy.h"
#include "common/logging.h"
#include "common/process_allocator.h"
#include "common/thread_name.h"
#include "common/units.h"
#include "devices/caching_cpu_allocator.h"
#include "devices/host_requirements.h"
#include "scheduler/core/inference_core.h"
#include "service/server/crash_report.h"
#include "service/server/protobuf_log.h"
#include "service/server/server.h"
#include "service/server/server_options.h"
#include "service/server/stop_signals.h"

namespace infergate {
namespace {

// Raises the soft limit on open files to the hard one: every client
// connection holds a descriptor, and at a soft limit of 1024 a flood of
// idle sockets would leave none for model files, REST or the metrics port.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    LOG_INFO << "open file limit raised from " << before << " to " << limit.rlim_cur;
  }
}

std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }

LogLevel ParseLevel(const std::string& s) {
  if (s == "debug") return LogLevel::kDebug;
  if (s == "warning") return LogLevel::kWarning;
  if (s == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

// Under glibc's malloc (the sanitizer builds; the server links jemalloc):
// request and reply buffers of a megabyte or more get their own mappings,
// returned to the system when freed. glibc otherwise raises its mmap
// threshold after the first such free (up to 32 MiB) and serves later large
// buffers from per-thread arenas that keep the memory: measured with a
// sustained burst of 3.6 MB requests against a 32 MiB in-flight budget,
// peak RSS grew 165 MiB with the default and 91 MiB with this.
void ReturnLargeBuffersToTheSystem() {
#if defined(__GLIBC__)
  if (CurrentProcessAllocator().kind == AllocatorKind::kSystem) mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
}

int Run(int argc, char** argv) {
  std::string help;
  absl::StatusOr<ServerOptions> parsed = ParseServerOptions(argc, argv, &help);
  if (!parsed.ok()) {
    std::cerr << "infergate: " << parsed.status().message() << "\n";
    return 2;
  }
  if (!help.empty()) {
    std::cout << help;
    return 0;
  }
  const ServerOptions& opts = *parsed;
  SetMinLogLevel(ParseLevel(opts.log_level));
  RouteProtobufLogsToServerLog();
  // Debian builds Abseil without NDEBUG, which leaves absl::Mutex's
  // lock-order graph on for every lock gRPC takes: a few per cent of the
  // CPU at high request rates, for a check meant for debug builds.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  LOG_INFO << "allocator: " << CurrentProcessAllocator().name;
  ReturnLargeBuffersToTheSystem();
  RaiseOpenFileLimit();
  // Before any tensor exists, so every tensor block comes back to it.
  if (CachingCpuAllocator::InstallForProcess(opts.cpu_tensor_cache_bytes) != nullptr) {
    LOG_INFO << "CPU tensor blocks of 64 KiB and more are kept for reuse, up to "
             << FormatBytes(opts.cpu_tensor_cache_bytes);
  }

  // SIGTERM/SIGINT start a drain whichever thread receives them, also
  // during warm-up (the drain then begins once warm-up ends).
  if (!StopSignals::Install()) {
    std::cerr << "infergate: cannot install the SIGTERM/SIGINT handlers\n";
    return 1;
  }

  // Before LibTorch sizes its thread pools, which would die with a stack
  // trace without /proc.
  if (absl::Status host = CheckHostRequirements(); !host.ok()) {
    std::cerr << "infergate: " << host.message() << "\n";
    return 1;
  }
  // Before the server starts a thread, so gRPC's, the HTTP server's and the
  // pollers inherit it; the device workers set their own (executor_set.cc).
  if (absl::Status s = SetThisThreadCpuPolicy(opts.io_thread_policy); !s.ok()) {
    LOG_WARNING << "threads other than the device workers keep the normal CPU policy: " << s.message();
  }
  // Every port bound; readiness NOT_SERVING until warm-up ends.
  absl::StatusOr<std::unique_ptr<Server>> created = Server::Create(opts, INFERGATE_VERSION);
  if (!created.ok()) {
    std::cerr << "infergate: " << created.status().message() << "\n";
    // 1: the server could not run (a port in use); 2: its options cannot be served.
    return created.status().code() == absl::StatusCode::kUnavailable ? 1 : 2;
  }
  Server& server = **created;
  // Tests and scripts read the bound ports from these lines, "listening" last.
  if (server.metrics_port() != 0) {
    std::printf("infergate metrics on %s:%d\n", HostOf(opts.metrics_address).c_str(), server.metrics_port());
  }
  if (server.http_port() != 0) {
    std::printf("infergate http on %s:%d\n", HostOf(opts.http_address).c_str(), server.http_port());
  }
  if (!opts.modelmesh_address.empty()) {
    std::printf("infergate modelmesh on %s:%d\n", HostOf(opts.modelmesh_address).c_str(), server.modelmesh_port());
  }
  std::printf("infergate listening on %s:%d\n", HostOf(opts.address).c_str(), server.port());
  std::fflush(stdout);

  // The first stop signal is read at once, also during warm-up, so the log
  // shows it arrived; the drain itself starts once warm-up ends.
  std::promise<int> signalled;
  std::shared_future<int> first_signal = signalled.get_future().share();
  std::thread signal_reader([&signalled, &server] {
    NameThisThread("stop signals");
    int sig = StopSignals::WaitForFirst();
    if (!server.core().ready()) LOG_INFO << "signal " << sig << " during start-up: draining once warm-up ends";
    signalled.set_value(sig);
  });
  if (absl::Status s = server.StartCore(); !s.ok()) {
    LOG_ERROR << s.message();
    signal_reader.detach();  // blocked reading the signal pipe; the process ends now
    return 1;
  }
  if (first_signal.wait_for(std::chrono::seconds(0)) != std::future_status::ready) server.SetServing();

  int sig = first_signal.get();
  signal_reader.join();
  LOG_INFO << "signal " << sig << ": draining for up to " << opts.drain_timeout.count()
           << " ms (a second signal is ignored, a third ends the process at once)";
  server.Drain(std::chrono::steady_clock::now() + opts.drain_timeout);
  created->reset();
  if (StopSignals::Count() > 1)
    LOG_INFO << "ignored " << StopSignals::Count() - 1 << " more stop signal(s) while draining";
  LOG_INFO << "stopped";
  return 0;
}

}  // namespace
}  // namespace infergate

int main(int argc, char** argv) {
  infergate::InstallCrashReport(argv[0]);
  return infergate::Run(argc, argv);
}
