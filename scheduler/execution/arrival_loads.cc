#include "scheduler/execution/arrival_loads.h"

#include <utility>
#include <vector>

#include "common/caught_exception.h"
#include "common/thread_name.h"

namespace infergate {

ArrivalLoads::~ArrivalLoads() { Stop(); }

bool ArrivalLoads::Ask(const std::string& lane, const std::string& key, std::function<void()> load) {
  {
    MutexLock lock(mu_);
    if (stopping_) return false;
    std::unique_ptr<Lane>& l = lanes_[lane];
    if (!l) l = std::make_unique<Lane>();
    if (l->keys.contains(key)) return true;
    if (l->waiting.size() >= capacity_) return false;
    l->keys.insert(key);
    l->waiting.emplace_back(key, std::move(load));
    if (!l->thread.joinable()) l->thread = std::thread([this, lane, raw = l.get()] { Run(lane, raw); });
  }
  cv_.notify_all();
  return true;
}

size_t ArrivalLoads::Waiting(const std::string& lane) const {
  MutexLock lock(mu_);
  auto it = lanes_.find(lane);
  return it == lanes_.end() ? 0 : it->second->waiting.size();
}

void ArrivalLoads::Run(const std::string& name, Lane* lane) {
  NameThisThread("loads " + name);
  UniqueMutexLock lock(mu_);
  for (;;) {
    cv_.wait(lock.native(), [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || !lane->waiting.empty(); });
    if (stopping_) return;
    auto [key, load] = std::move(lane->waiting.front());
    lane->waiting.pop_front();
    lock.Unlock();
    // What escapes is logged where it is caught; the lane goes on.
    (void)RunCatching("a load asked for on a request's arrival", load);
    load = nullptr;  // its captures go without the lock held
    lock.Lock();
    lane->keys.erase(key);
  }
}

void ArrivalLoads::Stop() {
  std::vector<std::thread> threads;
  // Dropped loads' captures go after the lock is released.
  std::vector<std::function<void()>> dropped;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    for (auto& [name, lane] : lanes_) {
      for (auto& [key, load] : lane->waiting) dropped.push_back(std::move(load));
      lane->waiting.clear();
      if (lane->thread.joinable() && lane->thread.get_id() != std::this_thread::get_id()) {
        threads.push_back(std::move(lane->thread));
      }
    }
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

}  // namespace infergate
