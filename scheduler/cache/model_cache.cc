#include "scheduler/cache/model_cache.h"

#include <algorithm>
#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/units.h"
#include "devices/device_failure.h"
#include "scheduler/model/torch_status.h"

namespace infergate {

ModelCache::Lease::Lease(Lease&& other) noexcept { *this = std::move(other); }

ModelCache::Lease& ModelCache::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (cache_) cache_->Release(slot_);
    model_ = std::move(other.model_);
    slot_ = std::move(other.slot_);
    cache_ = std::exchange(other.cache_, nullptr);
    loaded_now_ = other.loaded_now_;
    waited_for_load_ = other.waited_for_load_;
  }
  return *this;
}

ModelCache::Lease::~Lease() {
  if (cache_) cache_->Release(slot_);
}

void ModelCache::Release(const std::shared_ptr<void>& slot) {
  MutexLock lock(mu_);
  static_cast<Slot*>(slot.get())->in_flight--;
}

void ModelCache::SetBudget(const DeviceId& device, uint64_t bytes) {
  MutexLock lock(mu_);
  budgets_[device] = bytes;
}

uint64_t ModelCache::Budget(const DeviceId& device) const {
  MutexLock lock(mu_);
  auto it = budgets_.find(BudgetOwnerLocked(device));
  return it == budgets_.end() ? 0 : it->second;
}

void ModelCache::ShareBudget(const DeviceId& member, const DeviceId& owner) {
  MutexLock lock(mu_);
  budget_owner_[member] = owner;
}

const DeviceId& ModelCache::BudgetOwnerLocked(const DeviceId& device) const {
  auto it = budget_owner_.find(device);
  return it == budget_owner_.end() ? device : it->second;
}

uint64_t ModelCache::HeldLocked(const DeviceId& device, const ModelKey* except) const {
  const DeviceId& owner = BudgetOwnerLocked(device);
  auto outside = outside_.find(owner);
  uint64_t held = outside == outside_.end() ? 0 : outside->second;
  for (const auto& [key, slot] : slots_) {
    if (BudgetOwnerLocked(key.device) == owner && !(except && key == *except)) held += slot->bytes;
  }
  return held;
}

ModelCache::Evicted ModelCache::EvictLocked(const DeviceId& device, uint64_t target, const ModelKey* keep,
                                            uint64_t* held_after) {
  Evicted evicted;
  uint64_t held = HeldLocked(device, keep);
  std::vector<std::pair<uint64_t, ModelKey>> candidates;
  const DeviceId& owner = BudgetOwnerLocked(device);
  for (const auto& [key, slot] : slots_) {
    if (BudgetOwnerLocked(key.device) != owner || !slot->ready) continue;
    if (!slot->pinned && slot->in_flight == 0 && !(keep && key == *keep)) candidates.push_back({slot->last_used, key});
  }
  std::sort(candidates.begin(), candidates.end());
  for (const auto& [used, key] : candidates) {
    if (held <= target) break;
    auto it = slots_.find(key);
    held -= it->second->bytes;
    evicted.push_back(*it);
    slots_.erase(it);
  }
  if (held_after) *held_after = held;
  return evicted;
}

ModelCache::Room ModelCache::EvictForLocked(const DeviceId& device, uint64_t bytes, const ModelKey* keep,
                                            Evicted* evicted) {
  Room room;
  auto found = budgets_.find(BudgetOwnerLocked(device));
  room.budget = found == budgets_.end() ? 0 : found->second;
  if (room.budget == 0) return room;
  if (bytes > room.budget) {
    room.held = HeldLocked(device, keep);
    return room;
  }
  Evicted more = EvictLocked(device, room.budget - bytes, keep, &room.held);  // nothing if it fits already
  evicted->insert(evicted->end(), more.begin(), more.end());
  return room;
}

absl::Status ModelCache::MakeRoomLocked(const ModelKey& key, uint64_t bytes, const std::string& source,
                                        Evicted* evicted) {
  const Room room = EvictForLocked(key.device, bytes, &key, evicted);
  if (room.Fits(bytes)) return absl::OkStatus();
  const uint64_t budget = room.budget;
  if (bytes > budget) {
    return WithDeviceFailure(
        absl::ResourceExhaustedError(
            absl::StrCat("model ", key.ToString(), " needs ", FormatBytes(bytes), " (", bytes, " bytes, ", source,
                         ") on ", key.device.ToString(), ", more than the device's whole model cache budget of ",
                         FormatBytes(budget), " (", budget, " bytes): it can never be loaded there")),
        DeviceFailure::kTooLarge, "");
  }
  const uint64_t held = room.held;
  return WithDeviceFailure(
      absl::ResourceExhaustedError(absl::StrCat("no room for model ", key.ToString(), " on ", key.device.ToString(),
                                                " now: it needs ", FormatBytes(bytes), " (", bytes, " bytes, ", source,
                                                ") and models in use, pinned or loading hold ", FormatBytes(held),
                                                " of the ", FormatBytes(budget), " budget")),
      DeviceFailure::kOutOfMemory, "");
}

void ModelCache::Notify(const Evicted& evicted, EvictionReason why) {
  for (const auto& [key, slot] : evicted) {
    LOG_INFO << "evicted " << key.ToString() << " (" << slot->bytes << " bytes): " << EvictionReasonName(why);
    if (listener_) listener_(key, slot->bytes, why);
  }
}

std::optional<ModelCache::Lease> ModelCache::AcquireResident(const ModelKey& key) {
  std::shared_ptr<Slot> slot;
  {
    MutexLock lock(mu_);
    auto it = slots_.find(key);
    if (it == slots_.end() || !it->second->ready) return std::nullopt;
    slot = it->second;
    slot->in_flight++;  // held by the lease from here on
    slot->last_used = ++clock_;
  }
  Lease lease;
  lease.slot_ = slot;
  lease.cache_ = this;
  lease.model_ = *slot->result.get();  // ready: loaded, and only a good load is marked so
  return lease;
}

absl::StatusOr<ModelCache::Lease> ModelCache::Acquire(const ModelKey& key, const Loader& loader, bool pinned,
                                                      const Footprint& expected) {
  bool owner = false;
  bool was_ready = false;
  std::shared_ptr<Slot> slot;
  std::promise<Result> promise;
  Evicted evicted;
  absl::Status admitted;
  {
    MutexLock lock(mu_);
    auto it = slots_.find(key);
    if (it != slots_.end()) {
      slot = it->second;
      was_ready = slot->ready;
    } else {
      admitted = MakeRoomLocked(key, expected.total(), expected.source, &evicted);
      if (admitted.ok()) {
        slot = std::make_shared<Slot>();
        slot->result = promise.get_future().share();
        slot->pinned = pinned;
        slot->bytes = expected.total();  // reserved until the load says what it takes
        slot->activation_bytes = expected.activation_bytes;
        slots_.emplace(key, slot);
        owner = true;
      }
    }
    if (slot) {
      slot->in_flight++;  // held by the lease from here on
      slot->last_used = ++clock_;
    }
  }
  Notify(evicted, EvictionReason::kBudget);
  evicted.clear();
  if (!admitted.ok()) {
    LOG_WARNING << admitted.message();
    return admitted;
  }
  Lease lease;
  lease.slot_ = slot;
  lease.cache_ = this;
  lease.loaded_now_ = owner;
  lease.waited_for_load_ = !was_ready;
  if (!owner) {
    Result result = slot->result.get();
    if (!result.ok()) return result.status();
    lease.model_ = *std::move(result);
    return lease;
  }

  // The exact parameter bytes, known before anything reaches the device.
  AdmitBytes admit = [&](uint64_t parameter_bytes) {
    Evicted more;
    absl::Status room;
    {
      MutexLock lock(mu_);
      uint64_t bytes = parameter_bytes + slot->activation_bytes;
      room = MakeRoomLocked(key, bytes, "measured while loading", &more);
      if (room.ok()) slot->bytes = bytes;
    }
    Notify(more, EvictionReason::kBudget);
    return room;
  };
  Result result = absl::InternalError("model loader did not run");
  try {
    result = loader(admit);
  } catch (const std::exception& e) {  // a loader that throws must not leave waiters hanging
    result = absl::InternalError(absl::StrCat("loading ", key.ToString(), " threw: ", ConciseTorchMessage(e.what())));
  }
  absl::Status too_large;
  {
    MutexLock lock(mu_);
    auto it = slots_.find(key);
    if (result.ok()) {
      slot->ready = true;
      slot->ready_at = std::chrono::steady_clock::now();
      slot->bytes = (*result)->resident_bytes() + slot->activation_bytes;
      // A loader that did not call `admit` (or took more than it said) is
      // fitted now, after its load.
      too_large = MakeRoomLocked(key, slot->bytes, "measured after loading", &evicted);
      if (!too_large.ok() && DeviceFailureOf(too_large)->kind == DeviceFailure::kTooLarge) {
        if (it != slots_.end() && it->second == slot) slots_.erase(it);
      } else {
        too_large = absl::OkStatus();  // in use elsewhere: it stays, and the budget holds once they finish
      }
    } else if (it != slots_.end() && it->second == slot) {
      slots_.erase(it);
    }
  }
  Notify(evicted, EvictionReason::kBudget);
  if (!result.ok()) LOG_WARNING << "loading " << key.ToString() << " failed: " << result.status().message();
  promise.set_value(too_large.ok() ? result : Result(too_large));
  if (!too_large.ok()) return too_large;
  if (!result.ok()) return result.status();
  lease.model_ = *std::move(result);
  return lease;
}

void ModelCache::SetActivationBytes(const ModelKey& key, uint64_t bytes) {
  Evicted evicted;
  {
    MutexLock lock(mu_);
    auto it = slots_.find(key);
    if (it == slots_.end() || !it->second->ready || bytes <= it->second->activation_bytes) return;
    Slot& slot = *it->second;
    slot.bytes += bytes - slot.activation_bytes;
    slot.activation_bytes = bytes;
    absl::Status room = MakeRoomLocked(key, slot.bytes, "with its measured activation peak", &evicted);
    if (!room.ok()) LOG_WARNING << room.message();
    if (!room.ok() && DeviceFailureOf(room)->kind == DeviceFailure::kTooLarge) {
      // It cannot run there beside nothing at all: it leaves (leases finish on
      // it), and its learned size refuses the next load up front.
      evicted.push_back(*it);
      slots_.erase(it);
    }
  }
  Notify(evicted, EvictionReason::kBudget);
}

size_t ModelCache::EvictIdle(const DeviceId& device, const ModelKey* keep, EvictionReason why) {
  Evicted evicted;
  {
    MutexLock lock(mu_);
    evicted = EvictLocked(device, 0, keep);
  }
  Notify(evicted, why);
  return evicted.size();
}

size_t ModelCache::EvictIdleCopies(const std::function<bool(const ModelKey&)>& match, EvictionReason why) {
  Evicted evicted;
  {
    MutexLock lock(mu_);
    for (auto it = slots_.begin(); it != slots_.end();) {
      const Slot& slot = *it->second;
      if (slot.ready && !slot.pinned && slot.in_flight == 0 && match(it->first)) {
        evicted.push_back(*it);
        it = slots_.erase(it);
      } else {
        ++it;
      }
    }
  }
  Notify(evicted, why);
  return evicted.size();
}

size_t ModelCache::Unload(const std::function<bool(const ModelKey&)>& match) {
  Evicted dropped;
  {
    MutexLock lock(mu_);
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
  Notify(dropped, EvictionReason::kUnload);
  return dropped.size();
}

absl::Status ModelCache::HoldOutsideCopies(const DeviceId& device, uint64_t bytes, const std::string& what) {
  Evicted evicted;
  absl::Status held_now = absl::OkStatus();
  {
    MutexLock lock(mu_);
    const Room room = EvictForLocked(device, bytes, nullptr, &evicted);
    if (!room.Fits(bytes)) {
      held_now = absl::ResourceExhaustedError(absl::StrCat(
          what, " needs ", FormatBytes(bytes), " of ", device.ToString(), "'s budget of ", FormatBytes(room.budget),
          ", and models in use, pinned or loading hold ", FormatBytes(room.held)));
    } else {
      outside_[BudgetOwnerLocked(device)] += bytes;
    }
  }
  Notify(evicted, EvictionReason::kBudget);
  return held_now;
}

void ModelCache::ReleaseOutsideCopies(const DeviceId& device, uint64_t bytes) {
  MutexLock lock(mu_);
  uint64_t& held = outside_[BudgetOwnerLocked(device)];
  held -= std::min(held, bytes);
}

uint64_t ModelCache::HeldOutsideCopies(const DeviceId& device) const {
  MutexLock lock(mu_);
  auto it = outside_.find(BudgetOwnerLocked(device));
  return it == outside_.end() ? 0 : it->second;
}

std::vector<ResidentModel> ModelCache::Resident() const {
  MutexLock lock(mu_);
  std::vector<ResidentModel> out;
  for (const auto& [key, slot] : slots_) {
    if (slot->ready) out.push_back({key, slot->bytes, slot->pinned, slot->in_flight, slot->ready_at, slot->last_used});
  }
  return out;
}

bool ModelCache::IsResident(const ModelKey& key) const {
  MutexLock lock(mu_);
  auto it = slots_.find(key);
  return it != slots_.end() && it->second->ready;
}

uint64_t ModelCache::ResidentBytes(const DeviceId& device) const {
  MutexLock lock(mu_);
  uint64_t total = 0;
  for (const auto& [key, slot] : slots_) {
    if (key.device == device && slot->ready) total += slot->bytes;
  }
  return total;
}

}  // namespace infergate
