#include "service/call/handler_work_pool.h"

#include "absl/strings/str_cat.h"
#include "common/caught_exception.h"
#include "common/thread_name.h"

namespace infergate {

HandlerWorkPool::HandlerWorkPool(int threads, size_t max_queued) : max_queued_(max_queued) {
  if (threads < 1) threads = 1;
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, i] {
      NameThisThread(absl::StrCat("handler-", i));
      Run();
    });
  }
}

HandlerWorkPool::~HandlerWorkPool() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

bool HandlerWorkPool::TrySubmit(std::function<void()> work) {
  {
    MutexLock lock(mu_);
    if (stopping_ || (max_queued_ > 0 && queue_.size() >= max_queued_)) return false;
    queue_.push_back(std::move(work));
  }
  wake_.notify_one();
  return true;
}

void HandlerWorkPool::Run() {
  for (;;) {
    std::function<void()> work;
    {
      UniqueMutexLock lock(mu_);
      wake_.wait(lock.native(), [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    // The work answers its own caller, also when it fails; what escapes
    // it anyway is logged and counted, and the thread goes on.
    if (!RunCatching("handler work", work).ok()) exceptions_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace infergate
