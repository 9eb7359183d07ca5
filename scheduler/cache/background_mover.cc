#include "scheduler/cache/background_mover.h"

#include <utility>

#include "common/caught_exception.h"
#include "common/logging.h"
#include "common/thread_name.h"

namespace infergate {

BackgroundMover::BackgroundMover(Move move, size_t max_pending, std::chrono::milliseconds retry_after)
    : move_(std::move(move)), max_pending_(max_pending), retry_after_(retry_after), thread_([this] { Loop(); }) {}

BackgroundMover::~BackgroundMover() { Stop(); }

bool BackgroundMover::Want(Wanted wanted) {
  {
    MutexLock lock(mu_);
    if (stopping_ || wanted_.size() >= max_pending_) return false;
    const Key key{wanted.model, wanted.version, wanted.device};
    if (auto failed = failed_at_.find(key); failed != failed_at_.end()) {
      if (std::chrono::steady_clock::now() - failed->second < retry_after_) return false;
      failed_at_.erase(failed);
    }
    if (!wanted_.insert(key).second) return false;
    line_.push_back(std::move(wanted));
  }
  wake_.notify_one();
  return true;
}

void BackgroundMover::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    line_.clear();
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

uint64_t BackgroundMover::moved() const {
  MutexLock lock(mu_);
  return moved_;
}

uint64_t BackgroundMover::failed() const {
  MutexLock lock(mu_);
  return failed_;
}

size_t BackgroundMover::pending() const {
  MutexLock lock(mu_);
  return wanted_.size();
}

void BackgroundMover::Loop() {
  NameThisThread("model mover");
  UniqueMutexLock lock(mu_);
  for (;;) {
    wake_.wait(lock.native(), [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || !line_.empty(); });
    if (stopping_) return;
    Wanted next = std::move(line_.front());
    line_.pop_front();
    lock.Unlock();
    absl::Status moved;
    const absl::Status escaped = RunCatching("moving a model", [&] { moved = move_(next); });
    if (!escaped.ok()) moved = escaped;
    if (!moved.ok()) {
      LOG_WARNING << "moving model '" << next.model << "' version " << next.version << " to "
                  << next.device.ToString() << " failed: " << moved.message() << " (requests stay where it is resident)";
    }
    lock.Lock();
    const Key key{next.model, next.version, next.device};
    wanted_.erase(key);
    ++(moved.ok() ? moved_ : failed_);
    if (!moved.ok()) {
      if (failed_at_.size() >= 4096) failed_at_.clear();  // bounded: forgetting only allows a retry sooner
      failed_at_[key] = std::chrono::steady_clock::now();
    }
  }
}

}  // namespace infergate
