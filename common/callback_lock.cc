#include "common/callback_lock.h"

#include <cstdio>
#include <cstdlib>

namespace infergate {

thread_local int CallbackLock::held_by_this_thread_ = 0;

void CheckNoCallbackLockHeld(const char* where) {
  if (CallbackLock::HeldByThisThread() == 0) return;
  std::fprintf(stderr,
               "infergate: %s: an answer's callback would run on a thread that holds a front end's lock, which "
               "the callback may take; this would deadlock the server, so it stops here instead\n",
               where);
  std::abort();
}

}  // namespace infergate
