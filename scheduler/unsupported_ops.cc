#include "scheduler/unsupported_ops.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "devices/logging.h"

namespace infergate {
namespace {

constexpr char kHeader[] = "# infergate learned device limits v1: kind<TAB>model<TAB>reason";

std::optional<DeviceKind> KindFromName(absl::string_view name) {
  for (DeviceKind k : {DeviceKind::kCpu, DeviceKind::kCuda, DeviceKind::kMps}) {
    if (DeviceKindName(k) == name) return k;
  }
  return std::nullopt;
}

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  std::filesystem::path target(path);
  std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string tmp = (dir / absl::StrCat(".", target.filename().string(), ".tmp.", ::getpid())).string();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", tmp);
  size_t written = 0;
  while (written < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = Errno("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    absl::Status s = Errno("cannot flush", tmp);
    ::unlink(tmp.c_str());
    return s;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = Errno("cannot rename onto", path);
    ::unlink(tmp.c_str());
    return s;
  }
  // Make the rename itself durable.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

UnsupportedOpTable::UnsupportedOpTable(std::string state_file) : state_file_(std::move(state_file)) {}

absl::Status UnsupportedOpTable::Load() {
  if (state_file_.empty()) return absl::OkStatus();
  std::ifstream in(state_file_);
  if (!in) return absl::OkStatus();  // first start
  std::stringstream text;
  text << in.rdbuf();
  std::map<std::pair<std::string, DeviceKind>, std::string> loaded;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text.str(), '\n')) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> parts = absl::StrSplit(line, '\t');
    std::optional<DeviceKind> kind = parts.size() == 3 ? KindFromName(parts[0]) : std::nullopt;
    if (!kind || parts[1].empty() || parts[2].empty()) {
      return absl::DataLossError(absl::StrCat("state file ", state_file_, " line ", line_no, " is malformed"));
    }
    loaded[{parts[1], *kind}] = parts[2];
  }
  std::lock_guard<std::mutex> lock(mu_);
  entries_ = std::move(loaded);
  return absl::OkStatus();
}

bool UnsupportedOpTable::Record(const std::string& model, DeviceKind kind, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = entries_.emplace(std::make_pair(model, kind), reason);
  if (!inserted) return false;
  last_write_ = Save();
  if (!last_write_.ok()) LOG_WARNING << "cannot persist learned device limits: " << last_write_.message();
  return true;
}

absl::Status UnsupportedOpTable::Save() const {
  if (state_file_.empty()) return absl::OkStatus();
  std::string out = absl::StrCat(kHeader, "\n");
  for (const auto& [key, reason] : entries_) {
    absl::StrAppend(&out, DeviceKindName(key.second), "\t", key.first, "\t", reason, "\n");
  }
  return WriteFileAtomically(state_file_, out);
}

std::optional<std::string> UnsupportedOpTable::Lookup(const std::string& model, DeviceKind kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find({model, kind});
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> UnsupportedOpTable::ForKind(DeviceKind kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [key, reason] : entries_) {
    if (key.second != kind) continue;
    size_t colon = reason.find(':');
    out.push_back(absl::StrCat(key.first, ":", colon == std::string::npos ? reason : reason.substr(colon + 1)));
  }
  return out;
}

absl::Status UnsupportedOpTable::last_write_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_write_;
}

}  // namespace infergate
