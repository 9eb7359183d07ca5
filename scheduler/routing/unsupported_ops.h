#pragma once
// What the server has learned a device kind cannot run for a model file (an
// op MPS does not implement, a dtype it cannot hold), kept in a small state
// file so a restart remembers it. Entries are keyed by the model file's
// content key (size and modification time), so a replaced model.pt is probed
// afresh, and by the LibTorch version that learned them: entries from another
// version are dropped when the file is read, since a newer backend may run
// what an older one refused.
//
// Threading: every method may be called from any thread. Lookup runs on
// every routing decision and takes only the table's lock; the state file is
// written (with an fsync) outside that lock (see state_file.h).

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/mutex.h"
#include "devices/device_id.h"
#include "scheduler/cache/state_file.h"
#include "scheduler/model/fallback_reason.h"

namespace infergate {

class UnsupportedOpTable {
 public:
  // `state_file` may be empty: the table then lives in memory only.
  // `libtorch_version` is this build's (entries learned under another are
  // probed again).
  UnsupportedOpTable(std::string state_file, std::string libtorch_version);
  // Shares `state_file` with the other tables kept in it.
  UnsupportedOpTable(std::shared_ptr<StateFile> state_file, std::string libtorch_version);

  // Reads the state file if it exists. A malformed file is an error (the
  // table stays empty); a missing one is not. Lines of the older format
  // are rewritten in the current one.
  absl::Status Load();

  // Records that `model` with model file `file` (FileStamp::ContentKey) fails
  // on `kind` for `reason` (an unsupported op, a dtype) and rewrites the
  // state file atomically (outside the table's lock). True if new.
  bool Record(const std::string& model, const std::string& file, DeviceKind kind, const FallbackReason& reason);

  std::optional<FallbackReason> Lookup(const std::string& model, const std::string& file, DeviceKind kind) const;
  // True while nothing is learned (the common case), without the lock: the
  // router then skips building file keys and looking them up.
  bool empty() const { return size_.load(std::memory_order_acquire) == 0; }
  // "model:reason-detail" entries for one kind, e.g. "cnn:aten::max_pool2d".
  std::vector<std::string> ForKind(DeviceKind kind) const;
  absl::Status last_write_status() const;

 private:
  // The table's lines in the state file.
  std::vector<std::string> Render() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Key {
    DeviceKind kind;
    std::string model;
    std::string file;
    friend auto operator<=>(const Key&, const Key&) = default;
  };

  std::shared_ptr<StateFile> state_file_;
  std::string libtorch_version_;
  mutable Mutex mu_;
  std::map<Key, FallbackReason> entries_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> size_{0};  // entries_.size(), stored under mu_
};

}  // namespace infergate
