#include "scheduler/model_cache.h"

#include "absl/strings/str_cat.h"
#include "devices/logging.h"
#include "scheduler/loaded_model.h"

namespace infergate {

std::string ModelKey::ToString() const {
  return absl::StrCat(model, ":", version, "@", device.ToString(), "/", DTypeName(dtype));
}

absl::StatusOr<std::shared_ptr<LoadedModel>> ModelCache::GetOrLoad(const ModelKey& key, const Loader& loader,
                                                                   bool* loaded) {
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
      slots_.emplace(key, slot);
      owner = true;
    }
  }
  if (loaded) *loaded = owner;
  if (owner) {
    Result result = loader();
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = slots_.find(key);
      if (!result.ok()) {
        if (it != slots_.end() && it->second == slot) slots_.erase(it);
        LOG_WARNING << "loading " << key.ToString() << " failed: " << result.status().message();
      } else {
        slot->ready = true;
        slot->bytes = (*result)->parameter_bytes();
      }
    }
    promise.set_value(result);
    return result;
  }
  return slot->result.get();
}

size_t ModelCache::Unload(const std::function<bool(const ModelKey&)>& match) {
  std::vector<std::shared_ptr<Slot>> dropped;  // released outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (it->second->ready && match(it->first)) {
      LOG_INFO << "unloaded " << it->first.ToString();
      dropped.push_back(it->second);
      it = slots_.erase(it);
    } else {
      ++it;
    }
  }
  return dropped.size();
}

std::vector<ResidentModel> ModelCache::Resident() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ResidentModel> out;
  for (const auto& [key, slot] : slots_) {
    if (slot->ready) out.push_back({key, slot->bytes});
  }
  return out;
}

}  // namespace infergate
