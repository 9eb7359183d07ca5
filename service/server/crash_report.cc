#include "service/server/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "absl/debugging/symbolize.h"

namespace infergate {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};
constexpr int kMaxFrames = 64;

// Only async-signal-safe calls from here on: write(2), no allocation.
void Write(const char* text) {
  size_t left = strlen(text);
  while (left > 0) {
    ssize_t n = write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

void WriteHex(uintptr_t value) {
  char digits[2 + 2 * sizeof(value) + 1];
  int i = sizeof(digits) - 1;
  digits[i] = '\0';
  do {
    digits[--i] = "0123456789abcdef"[value & 0xf];
    value >>= 4;
  } while (value != 0 && i > 2);
  digits[--i] = 'x';
  digits[--i] = '0';
  Write(digits + i);
}

void WriteDecimal(unsigned long value) {
  char digits[24];
  int i = sizeof(digits) - 1;
  digits[i] = '\0';
  do {
    digits[--i] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  Write(digits + i);
}

std::atomic<bool> g_reporting{false};

[[maybe_unused]] void OnFatalSignal(int sig, siginfo_t* info, void*) {  // unused under the sanitizers
  // One report: a second thread that faults meanwhile waits for the first
  // to end the process.
  if (g_reporting.exchange(true)) {
    while (true) pause();
  }
  alarm(3);  // a report that faults or hangs itself still ends the process
  Write("*** ");
  if (const char* name = sigabbrev_np(sig)) {
    Write("SIG");
    Write(name);
  } else {
    Write("signal ");
    WriteDecimal(static_cast<unsigned long>(sig));
  }
  if (info && info->si_code <= 0) {  // sent (kill, tgkill, sigqueue), not raised by a fault
    Write(" sent by process ");
    WriteDecimal(static_cast<unsigned long>(info->si_pid));
  } else {
    Write(" received (fault address ");
    WriteHex(reinterpret_cast<uintptr_t>(info ? info->si_addr : nullptr));
    Write(")");
  }
  Write(" on thread ");
  WriteDecimal(static_cast<unsigned long>(syscall(SYS_gettid)));
  Write("; stack, innermost first ***\n");
  void* frames[kMaxFrames];
  const int n = backtrace(frames, kMaxFrames);
  for (int i = 0; i < n; ++i) {
    const uintptr_t pc = reinterpret_cast<uintptr_t>(frames[i]);
    char name[512];
    Write("    @ ");
    WriteHex(pc);
    Write(" ");
    // A return address points after its call: look up the call's byte.
    Write(absl::Symbolize(reinterpret_cast<void*>(i == 0 ? pc : pc - 1), name, sizeof(name)) ? name : "(unknown)");
    Write("\n");
  }
  Write("*** end of stack; the process ends by the signal ***\n");
  signal(sig, SIG_DFL);
  raise(sig);  // delivered as this handler returns
}

}  // namespace

void InstallCrashReport(const char* argv0) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  (void)argv0;
#else
  absl::InitializeSymbolizer(argv0);
  // backtrace() loads the unwinder on its first call, which allocates:
  // done here, not in the handler.
  void* warm[1];
  backtrace(warm, 1);
  // An alternate stack for this thread, so a stack overflow here can still
  // be reported (other threads report every other fault on their own stack).
  static char alternate_stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alternate_stack;
  ss.ss_size = sizeof(alternate_stack);
  sigaltstack(&ss, nullptr);
  struct sigaction action{};
  action.sa_sigaction = &OnFatalSignal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int sig : kFatalSignals) sigaction(sig, &action, nullptr);
#endif
}

}  // namespace infergate
