#include "scheduler/cache/state_file.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace infergate {
namespace {

constexpr char kHeader[] =
    "# infergate state v3: one fact per line, its first field the section\n"
    "# limit<TAB>kind<TAB>model<TAB>model file (size:mtime_ns)<TAB>libtorch<TAB>reason\n"
    "# footprint<TAB>kind<TAB>dtype<TAB>model<TAB>model file<TAB>libtorch<TAB>parameter bytes<TAB>activation bytes\n"
    "# accuracy<TAB>kind<TAB>device signature<TAB>dtype<TAB>model<TAB>model file sha256<TAB>check inputs<TAB>libtorch"
    "<TAB>outputs=name=abs error/FP32 magnitude/new NaN or inf;... or problem=text\n";

constexpr const char* kSections[] = {"limit", "footprint", "accuracy"};

}  // namespace

StateFile::StateFile(std::string path) : path_(std::move(path)) {}

absl::Status StateFile::Load() {
  std::map<std::string, std::vector<std::string>> sections;
  std::error_code ec;
  if (!path_.empty() && std::filesystem::exists(path_, ec)) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(path_, "state file"));
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      if (line.empty() || line[0] == '#') continue;
      std::string section;
      for (const char* name : kSections) {
        if (absl::StartsWith(line, absl::StrCat(name, "\t"))) section = name;
      }
      sections[section].emplace_back(section.empty() ? line : line.substr(section.size() + 1));
    }
  }
  MutexLock lock(mu_);
  sections_ = std::move(sections);
  return absl::OkStatus();
}

std::vector<std::string> StateFile::Section(const std::string& section) const {
  MutexLock lock(mu_);
  auto it = sections_.find(section);
  return it == sections_.end() ? std::vector<std::string>{} : it->second;
}

std::string StateFile::Render() const {
  std::string out = kHeader;
  for (const auto& [section, lines] : sections_) {
    if (section.empty()) continue;  // version 2 lines are rewritten by their table, tagged
    for (const std::string& line : lines) absl::StrAppend(&out, section, "\t", line, "\n");
  }
  return out;
}

uint64_t StateFile::Stage(const std::string& section, std::vector<std::string> lines) {
  MutexLock lock(mu_);
  sections_[section] = std::move(lines);
  return ++version_;
}

absl::Status StateFile::Write(uint64_t snapshot) {
  if (path_.empty()) return absl::OkStatus();
  MutexLock write_lock(write_mu_);
  if (snapshot <= written_version_) return absl::OkStatus();  // a newer snapshot is on disk already
  std::string text;
  uint64_t version = 0;
  {
    MutexLock lock(mu_);
    text = Render();  // the newest staged snapshot, which includes `snapshot`
    version = version_;
  }
  absl::Status written = WriteFileAtomically(path_, text);
  written_version_ = version;
  MutexLock lock(mu_);
  last_write_ = written;
  return written;
}

absl::Status StateFile::last_write_status() const {
  MutexLock lock(mu_);
  return last_write_;
}

}  // namespace infergate
