#pragma once
// Host copies of loaded weights. A model that may move between devices
// keeps its weights, as read from its file, in host memory once a loader
// has read them; every later load of the same file (onto the accelerator
// again after an eviction, or its CPU copy when it is demoted) starts from
// that copy: no file read, no deserialisation.
//
// Contract:
//  1. A host copy is keyed by the model file's identity (HostCopyKey: the
//     model, its path and the file's content stamp): a file replaced on
//     disk is never served from the copy of the old one.
//  2. Host copies count against the CPU's cache budget as a resident copy
//     does: Keep asks `reserve` for the bytes before it keeps anything and
//     gives them back through `give_back` when the copy goes.
//  3. Together they take at most `limit()` bytes (a share of the CPU's
//     budget; 0: no limit of their own). A new copy makes room by dropping
//     the least recently used others; one that cannot be given room is not
//     kept, and loads read the file as they would without it.
//  4. DropIf removes a model's copies (unloaded, removed, replaced); memory
//     goes once no copy made from one (counted where it lives) shares it.
//  5. What a copy holds (HostWeights) is the loader's business; the store
//     never looks inside it and never changes it.
//
// Thread-safe. `reserve` and `give_back` are called without the store's
// lock held (they take the model cache's).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/mutex.h"

namespace infergate {

// A loader's weights in host memory. Immutable once kept.
class HostWeights {
 public:
  virtual ~HostWeights() = default;
  // Host memory the weights take (what the CPU's budget is charged).
  virtual uint64_t bytes() const = 0;
};

struct HostCopyKey {
  std::string model;
  std::string path;
  std::string content;  // the file's stamp (FileStamp::ContentKey plus its inode)

  std::string ToString() const { return model + " (" + path + ")"; }
  friend auto operator<=>(const HostCopyKey&, const HostCopyKey&) = default;
  friend bool operator==(const HostCopyKey&, const HostCopyKey&) = default;
};

class HostCopyStore;

// What one load may do with host copies (load_servable.h): start from
// `copy` when there is one (found in the store before the load, by whoever
// decides whether the file must be checked: the load starts from exactly
// that copy, never from one looked up again, which may be gone by then),
// and, when reading the file instead and `keep`, leave the weights it read
// there under `key`.
struct HostCopyUse {
  HostCopyStore* store = nullptr;  // null: no host copies
  HostCopyKey key;
  bool keep = false;
  std::shared_ptr<const HostWeights> copy;  // null: the load reads the file
};

class HostCopyStore {
 public:
  // Asks the CPU's budget for `bytes` (evicting idle copies there to make
  // room) or says why not; gives them back.
  using Reserve = std::function<absl::Status(uint64_t bytes)>;
  using GiveBack = std::function<void(uint64_t bytes)>;
  // The bytes host copies may take together now (0: no limit of their own).
  using Limit = std::function<uint64_t()>;

  HostCopyStore(Reserve reserve, GiveBack give_back, Limit limit);
  ~HostCopyStore();
  HostCopyStore(const HostCopyStore&) = delete;
  HostCopyStore& operator=(const HostCopyStore&) = delete;

  // The copy for `key`, or null; a hit makes it the most recently used.
  std::shared_ptr<const HostWeights> Find(const HostCopyKey& key);
  // Whether there is a copy for `key` now (no use counted, nothing held).
  bool Contains(const HostCopyKey& key) const;
  // Keeps `weights` for `key` (requirements 2 and 3); false when there was
  // no room and nothing was kept. A second copy of a kept key is not kept.
  bool Keep(const HostCopyKey& key, std::shared_ptr<const HostWeights> weights);
  // Drops the copies `match` names (requirement 4); returns how many went.
  size_t DropIf(const std::function<bool(const HostCopyKey&)>& match);

  size_t count() const;
  uint64_t bytes() const;
  uint64_t hits() const;

 private:
  struct Entry {
    std::shared_ptr<const HostWeights> weights;
    uint64_t last_used = 0;
  };
  // Removes the least recently used entries until `bytes` more fit under
  // `limit`; what went is appended to `gone` (given back by the caller,
  // outside the lock). False when they cannot fit even with every entry gone.
  bool MakeRoomLocked(uint64_t bytes, uint64_t limit, std::vector<uint64_t>* gone) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void GiveBackAll(const std::vector<uint64_t>& gone);

  const Reserve reserve_;
  const GiveBack give_back_;
  const Limit limit_;
  mutable Mutex mu_;
  std::map<HostCopyKey, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace infergate
