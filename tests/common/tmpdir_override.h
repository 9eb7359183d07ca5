#pragma once
// Test helper: points TMPDIR at a fresh scratch folder (scratch_dir.h) while
// it lives, and puts back what TMPDIR was (or unsets it) when it goes, so a
// test can count exactly what the code under test leaves under TMPDIR.
// Overrides nest: an inner one restores the outer one's folder.
//
// Threading: TMPDIR is process-wide; make and destroy it on the test's
// thread, with nothing else reading the environment meanwhile.

#include <stdlib.h>

#include <optional>
#include <string>

#include "tests/common/scratch_dir.h"

namespace infergate::testing {

class TmpdirOverride {
 public:
  // `prefix` names the scratch folder, as for ScratchDir.
  explicit TmpdirOverride(const std::string& prefix) : dir_(prefix) {
    if (const char* was = std::getenv("TMPDIR")) was_ = was;
    ::setenv("TMPDIR", dir_.path().c_str(), 1);
  }
  ~TmpdirOverride() {
    if (was_) {
      ::setenv("TMPDIR", was_->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }
  TmpdirOverride(const TmpdirOverride&) = delete;
  TmpdirOverride& operator=(const TmpdirOverride&) = delete;

  // The folder TMPDIR names while this lives.
  const std::string& path() const { return dir_.path(); }

 private:
  ScratchDir dir_;
  std::optional<std::string> was_;
};

}  // namespace infergate::testing
