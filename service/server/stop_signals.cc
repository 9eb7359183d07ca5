#include "service/server/stop_signals.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace infergate {
namespace {

int g_pipe[2] = {-1, -1};
std::atomic<int> g_count{0};

void OnStopSignal(int sig) {
  int saved_errno = errno;
  int n = g_count.fetch_add(1) + 1;
  if (n >= 3) _exit(128 + 2);
  unsigned char byte = static_cast<unsigned char>(sig);
  // Full pipe: a signal is already waiting to be read, which is enough.
  ssize_t ignored = write(g_pipe[1], &byte, 1);
  (void)ignored;
  errno = saved_errno;
}

}  // namespace

bool StopSignals::Install() {
  if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  // The read end blocks; only the handler's write end must not.
  fcntl(g_pipe[0], F_SETFL, fcntl(g_pipe[0], F_GETFL) & ~O_NONBLOCK);
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  return sigaction(SIGTERM, &action, nullptr) == 0 && sigaction(SIGINT, &action, nullptr) == 0;
}

int StopSignals::WaitForFirst() {
  unsigned char byte = 0;
  while (read(g_pipe[0], &byte, 1) != 1) {
    if (errno != EINTR) return SIGTERM;
  }
  return byte;
}

int StopSignals::Count() { return g_count.load(); }

}  // namespace infergate
