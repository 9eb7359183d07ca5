#pragma once
// Test helper: a folder under the temp dir that is removed, with all it
// holds, when its owner goes away, so test runs leave nothing behind (the
// full suite runs every test several times: plain, ASan, loaded).
//
// ScratchDir is owned by one test or fixture. ProcessScratchDir() is one
// folder for the whole test process, for files a test keeps in a static
// (certificates, model files made once): removed when the process exits.
// Only the process that made a folder removes it, so a forked child that
// exits does not take its parent's files.
//
// Threading: the constructor and destructor are not thread-safe; File may
// be called from any thread.

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace infergate::testing {

class ScratchDir {
 public:
  // `prefix` names the folder ("ig_pki_" -> /tmp/ig_pki_a1B2c3).
  explicit ScratchDir(const std::string& prefix) : owner_(::getpid()) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchDir() {
    if (path_.empty() || ::getpid() != owner_) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // Empty when the folder could not be made.
  const std::string& path() const { return path_; }

  // A new file in the folder, named `prefix` and a unique tail, holding
  // `text`; its path.
  std::string File(const std::string& prefix, const std::string& text) const {
    std::string pattern = path_ + "/" + prefix + "XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) return "";
    ::close(fd);
    std::ofstream(pattern, std::ios::binary) << text;
    return pattern;
  }

 private:
  std::string path_;
  pid_t owner_;
};

inline const ScratchDir& ProcessScratchDir() {
  static const ScratchDir dir("ig_test_process_");
  return dir;
}

}  // namespace infergate::testing
