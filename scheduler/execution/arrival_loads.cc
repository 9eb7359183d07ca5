#include "scheduler/execution/arrival_loads.h"

#include <algorithm>
#include <utility>

#include "common/caught_exception.h"
#include "common/cpu_policy.h"
#include "common/thread_name.h"

namespace infergate {
namespace {

// What escapes is logged where it is caught; the lane goes on.
void RunEach(std::vector<ArrivalLoads::ThenFn>& thens, const ArrivalLoads::Hold& hold) {
  for (ArrivalLoads::ThenFn& then : thens) {
    (void)RunCatching("a request held for its model's load", [&] { then(hold); });
  }
  thens.clear();  // their captures go here, without the lock held
}

}  // namespace

ArrivalLoads::~ArrivalLoads() { Stop(); }

bool ArrivalLoads::Ask(const std::string& lane, const std::string& key, LoadFn load, ThenFn then, double estimate_us) {
  {
    MutexLock lock(mu_);
    if (stopping_) return false;
    std::unique_ptr<Lane>& l = lanes_[lane];
    if (!l) l = std::make_unique<Lane>();
    if (auto it = l->by_key.find(key); it != l->by_key.end()) {
      if (it->second->thens.size() >= capacity_) return false;
      it->second->thens.push_back(std::move(then));
      return true;
    }
    if (l->waiting.size() >= capacity_) return false;
    auto entry = std::make_shared<Load>();
    entry->key = key;
    entry->load = std::move(load);
    entry->thens.push_back(std::move(then));
    entry->estimate_us = estimate_us;
    l->by_key.emplace(key, entry);
    l->waiting.push_back(std::move(entry));
    if (!l->thread.joinable())
      l->thread = std::thread([this, lane, raw = l.get()] {
        // Requests wait for this thread's loads: it runs as a device worker
        // does, not as the request-moving thread that started it.
        UseNormalCpuPolicyForDeviceWork("arrival load lane");
        Run(lane, raw);
      });
  }
  cv_.notify_all();
  return true;
}

ArrivalLoads::Ahead ArrivalLoads::Before(const std::string& lane, const std::string& key) const {
  Ahead ahead;
  MutexLock lock(mu_);
  auto it = lanes_.find(lane);
  if (it == lanes_.end()) return ahead;
  const Lane& l = *it->second;
  if (l.running) {
    const double ran_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - l.running_since).count();
    ahead.running_left_us = std::max(0.0, l.running->estimate_us - ran_us);
    ahead.key_running = l.running->key == key;
    if (ahead.key_running) return ahead;
  }
  for (const std::shared_ptr<Load>& entry : l.waiting) {
    if (entry->key == key) break;
    ahead.waiting_us += entry->estimate_us;
  }
  return ahead;
}

size_t ArrivalLoads::Waiting(const std::string& lane) const {
  MutexLock lock(mu_);
  auto it = lanes_.find(lane);
  return it == lanes_.end() ? 0 : it->second->waiting.size();
}

size_t ArrivalLoads::Held(const std::string& lane) const {
  MutexLock lock(mu_);
  auto it = lanes_.find(lane);
  if (it == lanes_.end()) return 0;
  size_t held = 0;
  for (const auto& [key, entry] : it->second->by_key) held += entry->thens.size();
  return held;
}

void ArrivalLoads::Run(const std::string& name, Lane* lane) {
  NameThisThread("loads " + name);
  UniqueMutexLock lock(mu_);
  for (;;) {
    cv_.wait(lock.native(), [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || !lane->waiting.empty(); });
    if (lane->waiting.empty()) return;  // stopping, and Stop ran what waited
    std::shared_ptr<Load> entry = std::move(lane->waiting.front());
    lane->waiting.pop_front();
    lane->running = entry;
    lane->running_since = std::chrono::steady_clock::now();
    lock.Unlock();
    Hold hold;
    (void)RunCatching("a load asked for on a request's arrival", [&] { hold = entry->load(); });
    entry->load = nullptr;
    lock.Lock();
    // Taken with the key's removal, in one hold of the lock: an ask after
    // this starts a load of its own, never joins a load whose thens ran.
    std::vector<ThenFn> thens = std::move(entry->thens);
    lane->by_key.erase(entry->key);
    lane->running = nullptr;
    lock.Unlock();
    RunEach(thens, hold);
    hold.reset();
    lock.Lock();
  }
}

void ArrivalLoads::Stop() {
  std::vector<std::thread> threads;
  std::vector<ThenFn> dropped;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    for (auto& [name, lane] : lanes_) {
      for (std::shared_ptr<Load>& entry : lane->waiting) {
        for (ThenFn& then : entry->thens) dropped.push_back(std::move(then));
        entry->thens.clear();
        lane->by_key.erase(entry->key);
      }
      lane->waiting.clear();
      if (lane->thread.joinable() && lane->thread.get_id() != std::this_thread::get_id()) {
        threads.push_back(std::move(lane->thread));
      }
    }
  }
  cv_.notify_all();
  RunEach(dropped, nullptr);
  for (std::thread& t : threads) t.join();
}

}  // namespace infergate
