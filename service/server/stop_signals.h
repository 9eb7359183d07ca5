#pragma once
// SIGTERM and SIGINT as a request to drain, whichever thread the kernel
// delivers them to. Libraries start threads before main runs (OpenBLAS
// does), so blocking the signals in main cannot cover every thread; a
// handler can. The handler only counts and writes to a pipe (both
// async-signal-safe); the main thread waits on the pipe.
//
// The first signal starts the drain; a second one during the drain is
// logged and ignored; a third ends the process at once (exit status 130),
// for an operator who really means it.

namespace infergate {

class StopSignals {
 public:
  // Installs the handlers. Call once, early in main.
  static bool Install();
  // Blocks until the first signal has arrived (also one that arrived before
  // the call) and returns its number.
  static int WaitForFirst();
  // Signals received so far.
  static int Count();
};

}  // namespace infergate
