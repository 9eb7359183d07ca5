#pragma once
// A one-shot signal that a caller has gone away (an HTTP client closed its
// connection while its request was being answered), and the reactions to it.
//
// Threading: every method may be called from any thread. A reaction runs
// exactly once: on the thread that fires the signal, or at once on the
// subscribing thread when it has already fired; never under this object's
// lock, so a reaction may take locks of its own (cancelling a queued request
// answers it on the same thread).

#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"

namespace infergate {

class CancelSignal {
 public:
  CancelSignal() = default;
  CancelSignal(const CancelSignal&) = delete;
  CancelSignal& operator=(const CancelSignal&) = delete;

  // Runs every reaction subscribed so far; later calls do nothing.
  void Fire();
  // Runs `reaction` when the signal fires (now, if it has).
  void Subscribe(std::function<void()> reaction);
  bool fired() const;

 private:
  mutable Mutex mu_;
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::function<void()>> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infergate
