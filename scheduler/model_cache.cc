#include "scheduler/model_cache.h"

#include <algorithm>
#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace infergate {

ModelCache::Lease::Lease(Lease&& other) noexcept { *this = std::move(other); }

ModelCache::Lease& ModelCache::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (cache_) cache_->Release(slot_);
    model_ = std::move(other.model_);
    slot_ = std::move(other.slot_);
    cache_ = std::exchange(other.cache_, nullptr);
    loaded_now_ = other.loaded_now_;
  }
  return *this;
}

ModelCache::Lease::~Lease() {
  if (cache_) cache_->Release(slot_);
}

void ModelCache::Release(const std::shared_ptr<void>& slot) {
  std::lock_guard<std::mutex> lock(mu_);
  static_cast<Slot*>(slot.get())->in_flight--;
}

void ModelCache::SetBudget(const DeviceId& device, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  budgets_[device] = bytes;
}

uint64_t ModelCache::Budget(const DeviceId& device) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = budgets_.find(device);
  return it == budgets_.end() ? 0 : it->second;
}

std::vector<std::pair<ModelKey, std::shared_ptr<ModelCache::Slot>>> ModelCache::EvictLocked(const DeviceId& device,
                                                                                             uint64_t target,
                                                                                             const ModelKey* keep) {
  std::vector<std::pair<ModelKey, std::shared_ptr<Slot>>> evicted;
  uint64_t resident = 0;
  std::vector<std::pair<uint64_t, ModelKey>> candidates;
  for (const auto& [key, slot] : slots_) {
    if (key.device != device || !slot->ready) continue;
    resident += slot->bytes;
    if (!slot->pinned && slot->in_flight == 0 && !(keep && key == *keep)) candidates.push_back({slot->last_used, key});
  }
  std::sort(candidates.begin(), candidates.end());
  for (const auto& [used, key] : candidates) {
    if (resident <= target) break;
    auto it = slots_.find(key);
    resident -= it->second->bytes;
    evicted.push_back(*it);
    slots_.erase(it);
  }
  return evicted;
}

void ModelCache::Notify(const std::vector<std::pair<ModelKey, std::shared_ptr<Slot>>>& evicted, const char* why) {
  for (const auto& [key, slot] : evicted) {
    LOG_INFO << "evicted " << key.ToString() << " (" << slot->bytes << " bytes): " << why;
    if (listener_) listener_(key, slot->bytes, why);
  }
}

absl::StatusOr<ModelCache::Lease> ModelCache::Acquire(const ModelKey& key, const Loader& loader, bool pinned) {
  bool owner = false;
  std::shared_ptr<Slot> slot;
  std::promise<Result> promise;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slots_.find(key);
    if (it != slots_.end()) {
      slot = it->second;
    } else {
      slot = std::make_shared<Slot>();
      slot->result = promise.get_future().share();
      slot->pinned = pinned;
      slots_.emplace(key, slot);
      owner = true;
    }
    slot->in_flight++;  // held by the lease from here on
    slot->last_used = ++clock_;
  }
  Lease lease;
  lease.slot_ = slot;
  lease.cache_ = this;
  lease.loaded_now_ = owner;
  if (!owner) {
    Result result = slot->result.get();
    if (!result.ok()) return result.status();
    lease.model_ = *std::move(result);
    return lease;
  }

  Result result = absl::InternalError("model loader did not run");
  try {
    result = loader();
  } catch (const std::exception& e) {  // a loader that throws must not leave waiters hanging
    result = absl::InternalError(absl::StrCat("loading ", key.ToString(), " threw: ", e.what()));
  }
  std::vector<std::pair<ModelKey, std::shared_ptr<Slot>>> evicted;
  absl::Status over_budget;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slots_.find(key);
    if (result.ok()) {
      slot->ready = true;
      slot->bytes = (*result)->resident_bytes();
      auto budget = budgets_.find(key.device);
      if (budget != budgets_.end() && budget->second > 0) {
        if (slot->bytes > budget->second) {
          over_budget = absl::ResourceExhaustedError(
              absl::StrCat("model ", key.ToString(), " needs ", slot->bytes, " bytes, more than the cache budget of ",
                           budget->second, " bytes on ", key.device.ToString()));
          if (it != slots_.end() && it->second == slot) slots_.erase(it);
        } else {
          evicted = EvictLocked(key.device, budget->second, &key);
        }
      }
    } else if (it != slots_.end() && it->second == slot) {
      slots_.erase(it);
    }
  }
  Notify(evicted, "budget");
  if (!result.ok()) LOG_WARNING << "loading " << key.ToString() << " failed: " << result.status().message();
  promise.set_value(over_budget.ok() ? result : Result(over_budget));
  if (!over_budget.ok()) return over_budget;
  if (!result.ok()) return result.status();
  lease.model_ = *std::move(result);
  return lease;
}

size_t ModelCache::EvictIdle(const DeviceId& device, const ModelKey* keep, const char* why) {
  std::vector<std::pair<ModelKey, std::shared_ptr<Slot>>> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    evicted = EvictLocked(device, 0, keep);
  }
  Notify(evicted, why);
  return evicted.size();
}

size_t ModelCache::Unload(const std::function<bool(const ModelKey&)>& match) {
  std::vector<std::pair<ModelKey, std::shared_ptr<Slot>>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = slots_.begin(); it != slots_.end();) {
      // A model with requests in flight is dropped too: their leases keep it
      // alive until they finish, and the next request loads a fresh copy.
      if (it->second->ready && match(it->first)) {
        dropped.push_back(*it);
        it = slots_.erase(it);
      } else {
        ++it;
      }
    }
  }
  Notify(dropped, "unload");
  return dropped.size();
}

std::vector<ResidentModel> ModelCache::Resident() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ResidentModel> out;
  for (const auto& [key, slot] : slots_) {
    if (slot->ready) out.push_back({key, slot->bytes, slot->pinned, slot->in_flight});
  }
  return out;
}

bool ModelCache::IsResident(const ModelKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(key);
  return it != slots_.end() && it->second->ready;
}

uint64_t ModelCache::ResidentBytes(const DeviceId& device) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = 0;
  for (const auto& [key, slot] : slots_) {
    if (key.device == device && slot->ready) total += slot->bytes;
  }
  return total;
}

}  // namespace infergate
