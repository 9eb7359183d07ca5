#pragma once
// A stack trace in the server's log when the process dies of a fatal
// signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP): the handler
// writes the signal, the faulting address, the thread and the frames of
// the thread that received it to stderr, named by Abseil's symbolizer,
// then lets the signal end the process as before (exit by that signal,
// core dump where enabled). Without it a crash leaves only "Segmentation
// fault". The frames come from glibc's backtrace(), which unwinds by the
// binaries' unwind tables: Debian builds without frame pointers, and a
// frame-pointer walk (Abseil's own failure handler) stops at the first
// frame.
//
// Call once, first thing in main. Under AddressSanitizer or
// ThreadSanitizer nothing is installed: their own reports are more precise.

namespace infergate {

void InstallCrashReport(const char* argv0);

}  // namespace infergate
