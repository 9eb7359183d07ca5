#pragma once
// What the server has learned a device kind cannot run for a model (an op
// MPS does not implement, a dtype it cannot hold), kept in a small state
// file so a restart remembers it.
//
// Threading: every method may be called from any thread. Lookup runs on
// every routing decision and takes only the table's lock; the state file is
// written (with an fsync) outside that lock, under a writer lock of its own,
// newest snapshot wins.

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "devices/device_id.h"
#include "scheduler/fallback_reason.h"

namespace infergate {

class UnsupportedOpTable {
 public:
  // `state_file` may be empty: the table then lives in memory only.
  explicit UnsupportedOpTable(std::string state_file);

  // Reads the state file if it exists. A malformed file is an error (the
  // table stays empty); a missing one is not.
  absl::Status Load();

  // Records that `model` fails on `kind` for `reason` (an unsupported op, a
  // dtype) and rewrites the state file atomically (outside the table's
  // lock). True if new.
  bool Record(const std::string& model, DeviceKind kind, const FallbackReason& reason);

  std::optional<FallbackReason> Lookup(const std::string& model, DeviceKind kind) const;
  // "model:reason-detail" entries for one kind, e.g. "cnn:aten::max_pool2d".
  std::vector<std::string> ForKind(DeviceKind kind) const;
  absl::Status last_write_status() const;

 private:
  std::string Render() const;  // the state file's text; under mu_

  std::string state_file_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, DeviceKind>, FallbackReason> entries_;
  uint64_t version_ = 0;  // bumped by each Record; under mu_
  absl::Status last_write_;
  std::mutex write_mu_;           // one writer of the state file at a time
  uint64_t written_version_ = 0;  // the newest snapshot on disk; under write_mu_
};

}  // namespace infergate
