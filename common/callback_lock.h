#pragma once
// A mutex that an answer's callback may take: the state of a front end that
// the core calls back into (a stream's answers). While a thread holds one,
// nothing may run an answer's callback on that thread: the callback would
// wait for a lock its own thread holds, and the server would wedge, its
// gRPC threads blocked and SIGTERM never finishing (cancelling a queued
// request answers it on the cancelling thread; a stream that cancelled
// under its lock once did exactly this).
//
// The core calls CheckNoCallbackLockHeld before every callback, so the
// mistake stops the process at once with the place named, in every build,
// instead of wedging it silently under some rare interleaving.
//
// Threading: a BasicLockable; CallbackLockGuard is its annotated guard.
// The held count is per thread.

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace infergate {

class ABSL_LOCKABLE CallbackLock {
 public:
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION();
  void unlock() ABSL_UNLOCK_FUNCTION();
  // How many CallbackLocks the calling thread holds.
  static int HeldByThisThread();

 private:
  std::mutex mu_;
};

// Holds a CallbackLock for a scope, as std::lock_guard, with the
// annotations clang's thread-safety analysis reads.
class ABSL_SCOPED_LOCKABLE CallbackLockGuard {
 public:
  explicit CallbackLockGuard(CallbackLock& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~CallbackLockGuard() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  CallbackLockGuard(const CallbackLockGuard&) = delete;
  CallbackLockGuard& operator=(const CallbackLockGuard&) = delete;

 private:
  CallbackLock& mu_;
};

// Aborts with a message naming `where` when the calling thread holds a
// CallbackLock.
void CheckNoCallbackLockHeld(const char* where);

}  // namespace infergate
