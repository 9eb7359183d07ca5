#include "common/cancel_signal.h"

#include <utility>

namespace infergate {

void CancelSignal::Fire() {
  std::vector<std::function<void()>> reactions;
  {
    MutexLock lock(mu_);
    if (fired_) return;
    fired_ = true;
    reactions.swap(waiting_);
  }
  for (auto& reaction : reactions) reaction();
}

void CancelSignal::Subscribe(std::function<void()> reaction) {
  {
    MutexLock lock(mu_);
    if (!fired_) {
      waiting_.push_back(std::move(reaction));
      return;
    }
  }
  reaction();
}

bool CancelSignal::fired() const {
  MutexLock lock(mu_);
  return fired_;
}

}  // namespace infergate
