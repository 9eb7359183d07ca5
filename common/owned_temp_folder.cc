#include "common/owned_temp_folder.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/folder_entries.h"
#include "common/logging.h"
#include "common/mutex.h"

namespace infergate {
namespace {

namespace fs = std::filesystem;

// When process `pid` started (field 22 of /proc/<pid>/stat, in clock ticks
// since boot); nullopt when there is no such process.
std::optional<uint64_t> ProcessStartTicks(int64_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
  const size_t comm_end = stat.rfind(')');
  if (comm_end == std::string::npos) return std::nullopt;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(comm_end + 1), ' ', absl::SkipEmpty());
  uint64_t ticks = 0;
  // Field 22 of the line is the 20th after comm (fields 3 onward).
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &ticks)) return std::nullopt;
  return ticks;
}

// Sweeps `parent` for `prefix` once per process.
void SweepOnce(const std::string& parent, absl::string_view prefix) {
  // Without /proc (this process's own start unread: a mark without '.') no
  // process can be told alive: sweep nothing.
  if (ProcessOwnerMark().find('.') == std::string::npos) return;
  static Mutex mu;
  static auto* swept = new std::set<std::pair<std::string, std::string>>();
  {
    MutexLock lock(mu);
    if (!swept->insert({parent, std::string(prefix)}).second) return;
  }
  std::vector<std::string> removed = RemoveFoldersOfGoneProcesses(parent, prefix);
  if (!removed.empty()) {
    LOG_INFO << "removed " << removed.size() << " work folder(s) under " << parent
             << " left by server processes that are gone: " << absl::StrJoin(removed, ", ");
  }
}

}  // namespace

std::string TemporaryFolder() {
  std::error_code ec;
  const fs::path temp = fs::temp_directory_path(ec);  // $TMPDIR, else /tmp
  return ec ? std::string("/tmp") : temp.string();
}

const std::string& ProcessOwnerMark() {
  static const std::string mark = [] {
    const std::optional<uint64_t> ticks = ProcessStartTicks(::getpid());
    return ticks ? absl::StrCat(::getpid(), ".", *ticks) : absl::StrCat(::getpid());
  }();
  return mark;
}

std::vector<std::string> RemoveFoldersOfGoneProcesses(const std::string& parent, absl::string_view prefix) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const fs::directory_entry& e : FolderEntries(parent, &ec)) {
    // <prefix><pid>.<start ticks>-XXXXXX, a folder (never a link).
    const std::string name = e.path().filename().string();
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, prefix) || e.is_symlink(ec) || !e.is_directory(ec)) continue;
    const size_t dot = rest.find('.');
    const size_t dash = rest.find('-');
    int64_t pid = 0;
    uint64_t ticks = 0;
    if (dot == absl::string_view::npos || dash == absl::string_view::npos || dot > dash ||
        !absl::SimpleAtoi(rest.substr(0, dot), &pid) ||
        !absl::SimpleAtoi(rest.substr(dot + 1, dash - dot - 1), &ticks) || pid <= 0) {
      continue;
    }
    const std::optional<uint64_t> started = ProcessStartTicks(pid);
    if (started && *started == ticks) continue;  // its process lives
    std::error_code ignored;
    fs::remove_all(e.path(), ignored);
    removed.push_back(e.path().string());
  }
  return removed;
}

absl::StatusOr<std::string> MakeOwnedTempFolder(absl::string_view prefix, const std::string& parent) {
  const std::string where = parent.empty() ? TemporaryFolder() : parent;
  SweepOnce(where, prefix);
  std::string folder = (fs::path(where) / absl::StrCat(prefix, ProcessOwnerMark(), "-XXXXXX")).string();
  if (::mkdtemp(folder.data()) == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot make a work folder under ", where, ": ", std::generic_category().message(errno)));
  }
  return folder;
}

}  // namespace infergate
