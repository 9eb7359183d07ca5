#include "common/callback_lock.h"

#include <cstdio>
#include <cstdlib>

namespace infergate {

namespace {

// The count lives in this file alone (internal linkage): a thread_local
// class member reached from inline code went through g++'s TLS wrapper,
// which UBSan's null check misread as a null load.
thread_local int held_by_this_thread = 0;

}  // namespace

void CallbackLock::lock() {
  mu_.lock();
  ++held_by_this_thread;
}

void CallbackLock::unlock() {
  --held_by_this_thread;
  mu_.unlock();
}

int CallbackLock::HeldByThisThread() { return held_by_this_thread; }

void CheckNoCallbackLockHeld(const char* where) {
  if (CallbackLock::HeldByThisThread() == 0) return;
  std::fprintf(stderr,
               "infergate: %s: an answer's callback would run on a thread that holds a front end's lock, which "
               "the callback may take; this would deadlock the server, so it stops here instead\n",
               where);
  std::abort();
}

}  // namespace infergate
