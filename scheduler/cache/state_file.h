#pragma once
// The server's state file (--state-file): what it learned at run time and
// keeps across restarts, one line per fact, in sections each owned by one
// table (device limits, model footprints). Every write replaces one
// section and rewrites the whole file atomically (write, fsync, rename),
// newest snapshot wins, so a crash leaves the old file or the new one.
//
// Threading: every method may be called from any thread. Sections are kept
// under one lock; the file is written outside it, under a writer lock. A
// table that renders its section under its own lock stages it under that
// lock too (Stage, which only takes this class's leaf lock) and writes
// after unlocking (Write): then the order of the staged snapshots is the
// order of the table's changes, and the newest one reaches the file.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"

namespace infergate {

class StateFile {
 public:
  // `path` may be empty: sections then live in memory only.
  explicit StateFile(std::string path);

  const std::string& path() const { return path_; }

  // Reads the file (again) into its sections; a missing file is empty. A
  // line's first tab-separated field names its section; lines of the
  // version 2 format, which had no section names, come back in section ""
  // for the table that understands them.
  absl::Status Load();

  // The lines of `section` (without the section name) as last read or
  // replaced.
  std::vector<std::string> Section(const std::string& section) const;

  // Replacing a section takes two steps. Stage makes `lines` the content
  // of `section` in memory and returns the snapshot's number; it never
  // blocks on the disk. Write(snapshot) rewrites the whole file with the
  // newest staged snapshot unless one as new is on disk already (then it
  // returns OK at once). The status of the write is also kept for
  // last_write_status().
  uint64_t Stage(const std::string& section, std::vector<std::string> lines);
  absl::Status Write(uint64_t snapshot);

  absl::Status last_write_status() const;

 private:
  std::string Render() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  mutable Mutex mu_;
  std::map<std::string, std::vector<std::string>> sections_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by each Stage
  absl::Status last_write_ ABSL_GUARDED_BY(mu_);
  Mutex write_mu_;                                           // one writer of the file at a time
  uint64_t written_version_ ABSL_GUARDED_BY(write_mu_) = 0;  // the newest snapshot on disk
};

}  // namespace infergate
