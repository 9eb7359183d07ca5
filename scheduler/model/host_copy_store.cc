#include "scheduler/model/host_copy_store.h"

#include <algorithm>
#include <utility>

#include "common/logging.h"
#include "common/units.h"

namespace infergate {

HostCopyStore::HostCopyStore(Reserve reserve, GiveBack give_back, Limit limit)
    : reserve_(std::move(reserve)), give_back_(std::move(give_back)), limit_(std::move(limit)) {}

HostCopyStore::~HostCopyStore() {
  std::vector<uint64_t> gone;
  {
    MutexLock lock(mu_);
    for (const auto& [key, entry] : entries_) gone.push_back(entry.weights->bytes());
    entries_.clear();
    bytes_ = 0;
  }
  GiveBackAll(gone);
}

std::shared_ptr<const HostWeights> HostCopyStore::Find(const HostCopyKey& key) {
  MutexLock lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  it->second.last_used = ++clock_;
  ++hits_;
  return it->second.weights;
}

bool HostCopyStore::Contains(const HostCopyKey& key) const {
  MutexLock lock(mu_);
  return entries_.count(key) > 0;
}

bool HostCopyStore::MakeRoomLocked(uint64_t bytes, uint64_t limit, std::vector<uint64_t>* gone) {
  if (limit == 0) return true;
  if (bytes > limit) return false;
  std::vector<std::pair<uint64_t, HostCopyKey>> by_age;
  for (const auto& [key, entry] : entries_) by_age.emplace_back(entry.last_used, key);
  std::sort(by_age.begin(), by_age.end());
  for (const auto& [used, key] : by_age) {
    if (bytes_ + bytes <= limit) break;
    auto it = entries_.find(key);
    const uint64_t held = it->second.weights->bytes();
    LOG_INFO << "host copy of " << key.ToString() << " dropped (" << FormatBytes(held)
             << ") to make room for another under the host copies' share of the cpu budget";
    bytes_ -= held;
    gone->push_back(held);
    entries_.erase(it);
  }
  return bytes_ + bytes <= limit;
}

void HostCopyStore::GiveBackAll(const std::vector<uint64_t>& gone) {
  for (uint64_t bytes : gone) give_back_(bytes);
}

bool HostCopyStore::Keep(const HostCopyKey& key, std::shared_ptr<const HostWeights> weights) {
  if (!weights) return false;
  const uint64_t bytes = weights->bytes();
  const uint64_t limit = limit_ ? limit_() : 0;
  std::vector<uint64_t> gone;
  bool fits = false;
  {
    MutexLock lock(mu_);
    if (entries_.count(key)) return false;
    fits = MakeRoomLocked(bytes, limit, &gone);
  }
  GiveBackAll(gone);
  if (!fits) {
    LOG_INFO << "host copy of " << key.ToString() << " not kept: " << FormatBytes(bytes)
             << " exceed the host copies' share of the cpu budget (" << FormatBytes(limit) << ")";
    return false;
  }
  if (absl::Status room = reserve_(bytes); !room.ok()) {
    LOG_INFO << "host copy of " << key.ToString() << " not kept: " << room.message();
    return false;
  }
  {
    MutexLock lock(mu_);
    if (!entries_.count(key)) {
      entries_[key] = Entry{std::move(weights), ++clock_};
      bytes_ += bytes;
      LOG_INFO << "host copy of " << key.ToString() << " kept (" << FormatBytes(bytes)
               << "): later loads of the file start from it";
      return true;
    }
  }
  give_back_(bytes);  // another load kept the same file's copy meanwhile
  return false;
}

size_t HostCopyStore::DropIf(const std::function<bool(const HostCopyKey&)>& match) {
  std::vector<uint64_t> gone;
  {
    MutexLock lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (!match(it->first)) {
        ++it;
        continue;
      }
      const uint64_t held = it->second.weights->bytes();
      bytes_ -= held;
      gone.push_back(held);
      it = entries_.erase(it);
    }
  }
  GiveBackAll(gone);
  return gone.size();
}

size_t HostCopyStore::count() const {
  MutexLock lock(mu_);
  return entries_.size();
}

uint64_t HostCopyStore::bytes() const {
  MutexLock lock(mu_);
  return bytes_;
}

uint64_t HostCopyStore::hits() const {
  MutexLock lock(mu_);
  return hits_;
}

}  // namespace infergate
