#include "tests/integration/server_process.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/common/build_paths.h"
#include "tests/common/scratch_dir.h"

namespace infergate::testing {
namespace {

std::string TempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
  char* made = mkdtemp(pattern.data());
  return made ? std::string(made) : std::string();
}

std::vector<char*> Argv(std::vector<std::string>& args) {
  std::vector<char*> out;
  for (std::string& a : args) out.push_back(a.data());
  out.push_back(nullptr);
  return out;
}

bool WaitServing(const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& creds,
                 std::chrono::steady_clock::time_point deadline) {
  auto channel = grpc::CreateChannel(address, creds);
  auto stub = grpc::health::v1::Health::NewStub(channel);
  while (std::chrono::steady_clock::now() < deadline) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    if (stub->Check(&ctx, req, &resp).ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace

std::unique_ptr<ServerProcess> ServerProcess::Launch(const std::vector<std::string>& args,
                                                     std::chrono::seconds timeout) {
  auto server = std::unique_ptr<ServerProcess>(new ServerProcess());
  std::string dir = TempDir("ig_server_");
  server->dir_ = dir;
  server->log_path_ = dir + "/stderr.log";
  int out_pipe[2];
  if (pipe(out_pipe) != 0) {
    ADD_FAILURE() << "pipe failed";
    return nullptr;
  }
  // The tests load and unload models freely: their servers open the admin
  // API (the default keeps it closed), which `args` may turn off again with
  // --open-admin-api=false (security_test checks the default).
  std::vector<std::string> full = {InfergateBinary(), "--address=127.0.0.1:0", "--metrics-address=127.0.0.1:0",
                                   "--http-address=127.0.0.1:0", "--open-admin-api"};
  full.insert(full.end(), args.begin(), args.end());
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    int err = open(server->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) dup2(err, STDERR_FILENO);
    close(out_pipe[0]);
    std::vector<char*> argv = Argv(full);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  server->pid_ = pid;
  server->stdout_fd_ = out_pipe[0];

  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string seen;
  const std::string marker = "infergate listening on ";
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{server->stdout_fd_, POLLIN, 0};
    if (poll(&pfd, 1, 100) > 0) {
      char buf[512];
      ssize_t n = read(server->stdout_fd_, buf, sizeof(buf));
      if (n <= 0) break;
      seen.append(buf, static_cast<size_t>(n));
      size_t at = seen.find(marker);
      size_t nl = at == std::string::npos ? std::string::npos : seen.find('\n', at);
      if (nl != std::string::npos) {
        server->address_ = seen.substr(at + marker.size(), nl - at - marker.size());
        const std::string http_marker = "infergate http on ";
        size_t h = seen.find(http_marker);
        size_t hnl = h == std::string::npos ? std::string::npos : seen.find('\n', h);
        if (hnl != std::string::npos) {
          server->http_address_ = seen.substr(h + http_marker.size(), hnl - h - http_marker.size());
        }
        const std::string metrics_marker = "infergate metrics on ";
        size_t m = seen.find(metrics_marker);
        size_t mnl = m == std::string::npos ? std::string::npos : seen.find('\n', m);
        if (mnl != std::string::npos) {
          server->metrics_address_ = seen.substr(m + metrics_marker.size(), mnl - m - metrics_marker.size());
        }
        break;
      }
    }
    if (!server->Alive()) break;
  }
  if (server->address_.empty()) {
    ADD_FAILURE() << "server did not report its address; log:\n" << server->Log();
    return nullptr;
  }
  return server;
}

std::unique_ptr<ServerProcess> ServerProcess::Start(const std::vector<std::string>& args, std::chrono::seconds timeout,
                                                    const std::string& tls_ca, const std::string& tls_cert,
                                                    const std::string& tls_key) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_ptr<ServerProcess> server = Launch(args, timeout);
  if (!server) return nullptr;
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!tls_ca.empty()) {
    auto slurp = [](const std::string& path) {
      std::ifstream in(path);
      std::stringstream ss;
      ss << in.rdbuf();
      return ss.str();
    };
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = slurp(tls_ca);
    if (!tls_cert.empty()) {
      ssl.pem_cert_chain = slurp(tls_cert);
      ssl.pem_private_key = slurp(tls_key);
    }
    creds = grpc::SslCredentials(ssl);
  }
  if (!WaitServing(server->address_, creds, deadline)) {
    ADD_FAILURE() << "server at " << server->address_ << " never became SERVING; log:\n" << server->Log();
    return nullptr;
  }
  return server;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) Stop();
  if (stdout_fd_ >= 0) close(stdout_fd_);
  // The log stays for a test that failed (it names the file); else it goes.
  if (!dir_.empty() && !::testing::Test::HasFailure()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

bool ServerProcess::Alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

int ServerProcess::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  return WaitForExit();
}

int ServerProcess::WaitForExit(std::chrono::milliseconds limit) {
  if (pid_ <= 0) return -1;
  int status = 0;
  for (const auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return -1;
}

std::string ServerProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int RunCommand(const std::vector<std::string>& argv_in, std::string* output) {
  std::vector<std::string> args = argv_in;
  int out_pipe[2];
  if (pipe(out_pipe) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    close(out_pipe[0]);
    std::vector<char*> argv = Argv(args);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(out_pipe[0], buf, sizeof(buf))) > 0) output->append(buf, static_cast<size_t>(n));
  close(out_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string DemoRepositoryTemplate() {
  // Made once per build of make-demo-models (its size and time name the
  // copy) by whichever test process comes first, under a lock; a rebuilt
  // binary makes a new one.
  struct stat made{};
  if (stat(MakeDemoModelsBinary(), &made) != 0) {
    ADD_FAILURE() << MakeDemoModelsBinary() << " is missing";
    return "";
  }
  const std::string dir = std::string(MakeDemoModelsBinary()) + ".repository-" + std::to_string(made.st_size) + "-" +
                          std::to_string(made.st_mtim.tv_sec) + "." + std::to_string(made.st_mtim.tv_nsec);
  const int lock = open((dir + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock < 0 || flock(lock, LOCK_EX) != 0) {
    ADD_FAILURE() << "cannot lock " << dir << ".lock";
    if (lock >= 0) close(lock);
    return "";
  }
  std::error_code ec;
  if (!std::filesystem::exists(dir + "/.complete", ec)) {
    std::filesystem::remove_all(dir, ec);
    std::string out;
    const int rc = RunCommand({MakeDemoModelsBinary(), dir, "--with-test-models"}, &out);
    if (rc != 0) ADD_FAILURE() << "make-demo-models failed with " << rc << ":\n" << out;
    std::ofstream(dir + "/.complete") << "made\n";
  }
  close(lock);
  return dir;
}

namespace {

// The demo repository's copy for the running test case: made at the case's
// first DemoRepository(), removed when the case ends (a few MB), so that
// every case, and every repetition of one (--gtest_repeat), starts from
// the repository as made, whatever an earlier case changed; the last copy
// goes with the process's scratch folder. Registered with GoogleTest's
// listeners before any test runs (a static initialiser). Thread-safe.
class DemoRepositoryCopies : public ::testing::EmptyTestEventListener {
 public:
  static DemoRepositoryCopies& Get() {
    static DemoRepositoryCopies* const copies = [] {
      auto* made = new DemoRepositoryCopies();  // GoogleTest's listener list owns it
      ::testing::UnitTest::GetInstance()->listeners().Append(made);
      return made;
    }();
    return *copies;
  }

  std::string ForThisCase() {
    std::lock_guard<std::mutex> hold(mu_);
    if (!dir_.empty()) return dir_;
    dir_ = ProcessScratchDir().path() + "/models-" + std::to_string(++copies_);
    const std::string made = DemoRepositoryTemplate();
    std::error_code ec;
    std::filesystem::copy(made, dir_, std::filesystem::copy_options::recursive, ec);
    if (ec) ADD_FAILURE() << "cannot copy " << made << " to " << dir_ << ": " << ec.message();
    std::filesystem::remove(dir_ + "/.complete", ec);
    return dir_;
  }

  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard<std::mutex> hold(mu_);
    if (dir_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }

 private:
  DemoRepositoryCopies() = default;

  std::mutex mu_;
  std::string dir_;  // the running case's copy; empty until it asks
  int copies_ = 0;   // names each copy apart
};

// Registers the listener before main() runs the tests.
[[maybe_unused]] const DemoRepositoryCopies& kDemoRepositoryCopies = DemoRepositoryCopies::Get();

}  // namespace

std::string DemoRepository() { return DemoRepositoryCopies::Get().ForThisCase(); }

uint64_t ProcStatusKib(pid_t pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  const std::string prefix(field);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return std::stoull(line.substr(prefix.size()));
  }
  return 0;
}

bool ResetPeakRss(pid_t pid) {
  std::ofstream out("/proc/" + std::to_string(pid) + "/clear_refs");
  out << "5";
  out.flush();
  return out.good();
}

std::string ScrapeMetrics(const ServerProcess& server) {
  std::string out;
  if (server.metrics_address().empty() ||
      RunCommand({"/usr/bin/curl", "-s", "--max-time", "10", "http://" + server.metrics_address() + "/metrics"},
                 &out) != 0) {
    return "";
  }
  return out;
}

double MetricValue(const std::string& scrape, const std::string& series) {
  const std::string line_start = series + " ";
  for (size_t at = 0; at < scrape.size();) {
    const size_t end = std::min(scrape.find('\n', at), scrape.size());
    if (scrape.compare(at, line_start.size(), line_start) == 0) {
      return std::strtod(scrape.c_str() + at + line_start.size(), nullptr);
    }
    at = end + 1;
  }
  return std::nan("");
}

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

double AddedSince(const std::string& before, const ServerProcess& server, const std::string& series) {
  const double was = MetricValue(before, series);
  const double now = MetricValue(ScrapeMetrics(server), series);
  return (std::isnan(now) ? 0 : now) - (std::isnan(was) ? 0 : was);
}

}  // namespace infergate::testing
