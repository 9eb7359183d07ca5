#pragma once
// What changed in the model repository between what the server last acted
// on and what is on disk now: the poller's diffing, as a pure function so it
// reads (and is tested) apart from loading and publishing.

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/repository/repository_scan.h"

namespace infergate {

struct ModelDiff {
  std::string model;
  bool added = false;           // a folder the server does not serve yet
  bool removed = false;         // its folder is gone
  bool config_changed = false;  // config.pbtxt written, replaced, added or deleted
  std::vector<int64_t> versions_added, versions_changed, versions_removed;  // ascending

  bool empty() const;
  std::string ToString() const;  // for logs: "mlp: version 3 added, version 2 changed"
};

// Changes from `known` (what each published entry was built from, files
// tried and refused included) to `now`. With `previous` (the scan before
// `now`), a model whose files changed between the two scans is left for the
// next poll: it may still be being written, and acting on a file only once
// it has held still for one interval keeps half-copied files from being
// tried at all.
std::vector<ModelDiff> DiffRepository(const DiskRepository& known, const DiskRepository& now,
                                      const DiskRepository* previous = nullptr);

}  // namespace infergate
