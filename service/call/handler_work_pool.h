#pragma once
// Threads for the built-in handlers' CPU-heavy work (decoding and
// preprocessing an image, up to a second for the largest allowed), so that
// it runs neither on an HTTP I/O thread (where it would stall every other
// connection that thread serves, health probes included) nor on a gRPC
// callback thread.
//
// The queue is bounded: work that does not fit is refused at once (the
// caller answers RESOURCE_EXHAUSTED), never queued without limit. Work
// carries its own deadline and checks it (ImageDecodeOptions::keep_going);
// work that throws is caught, logged and counted, and the thread goes on.
//
// Threading and ownership: TrySubmit from any thread. The destructor runs
// what is queued (so every caller that was accepted is answered) and joins
// the threads; destroy the pool before what its work refers to.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace infergate {

class HandlerWorkPool {
 public:
  // `threads` at least 1; at most `max_queued` waiting (0: no limit).
  HandlerWorkPool(int threads, size_t max_queued);
  ~HandlerWorkPool();
  HandlerWorkPool(const HandlerWorkPool&) = delete;
  HandlerWorkPool& operator=(const HandlerWorkPool&) = delete;

  // Queues `work`; false (and `work` dropped unrun) when the queue is full
  // or the pool is stopping.
  bool TrySubmit(std::function<void()> work);

  size_t max_queued() const { return max_queued_; }
  // Work that threw (caught; the thread went on), for tests and logs.
  uint64_t exceptions() const { return exceptions_.load(std::memory_order_relaxed); }

 private:
  void Run();

  const size_t max_queued_;
  Mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> exceptions_{0};
  std::vector<std::thread> threads_;
};

}  // namespace infergate
