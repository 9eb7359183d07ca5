#include "scheduler/unsupported_ops.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/logging.h"

namespace infergate {
namespace {

constexpr char kHeader[] =
    "# infergate learned device limits v2: kind<TAB>model<TAB>model file (size:mtime_ns)<TAB>libtorch<TAB>reason";

std::optional<DeviceKind> KindFromName(absl::string_view name) {
  for (DeviceKind k : {DeviceKind::kCpu, DeviceKind::kCuda, DeviceKind::kMps}) {
    if (DeviceKindName(k) == name) return k;
  }
  return std::nullopt;
}

}  // namespace

UnsupportedOpTable::UnsupportedOpTable(std::string state_file, std::string libtorch_version)
    : state_file_(std::move(state_file)), libtorch_version_(std::move(libtorch_version)) {}

absl::Status UnsupportedOpTable::Load() {
  if (state_file_.empty()) return absl::OkStatus();
  std::error_code ec;
  if (!std::filesystem::exists(state_file_, ec)) return absl::OkStatus();  // first start
  absl::StatusOr<std::string> text = ReadFile(state_file_, "state file");
  if (!text.ok()) return text.status();
  std::map<Key, FallbackReason> loaded;
  int line_no = 0;
  size_t stale = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> parts = absl::StrSplit(line, '\t');
    if (parts.size() == 3) {  // v1: learned for no particular file or LibTorch
      ++stale;
      continue;
    }
    std::optional<DeviceKind> kind = parts.size() == 5 ? KindFromName(parts[0]) : std::nullopt;
    std::optional<FallbackReason> reason = parts.size() == 5 ? FallbackReason::Parse(parts[4]) : std::nullopt;
    if (!kind || parts[1].empty() || !reason) {
      return absl::DataLossError(absl::StrCat("state file ", state_file_, " line ", line_no, " is malformed"));
    }
    if (parts[3] != libtorch_version_) {
      ++stale;
      continue;
    }
    loaded[{*kind, parts[1], parts[2]}] = *std::move(reason);
  }
  if (stale > 0) {
    LOG_INFO << "state file " << state_file_ << ": " << stale << " learned device limit(s) from another LibTorch "
             << "version or an older format dropped; those models are tried on the device again";
  }
  std::lock_guard<std::mutex> lock(mu_);
  entries_ = std::move(loaded);
  return absl::OkStatus();
}

bool UnsupportedOpTable::Record(const std::string& model, const std::string& file, DeviceKind kind,
                                const FallbackReason& reason) {
  std::string text;
  uint64_t version = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = entries_.emplace(Key{kind, model, file}, reason);
    if (!inserted) return false;
    if (state_file_.empty()) return true;
    text = Render();
    version = ++version_;
  }
  std::lock_guard<std::mutex> write_lock(write_mu_);
  if (version <= written_version_) return true;  // a newer snapshot is on disk already
  absl::Status written = WriteFileAtomically(state_file_, text);
  written_version_ = version;
  if (!written.ok()) LOG_WARNING << "cannot persist learned device limits: " << written.message();
  std::lock_guard<std::mutex> lock(mu_);
  last_write_ = written;
  return true;
}

std::string UnsupportedOpTable::Render() const {
  std::string out = absl::StrCat(kHeader, "\n");
  for (const auto& [key, reason] : entries_) {
    absl::StrAppend(&out, DeviceKindName(key.kind), "\t", key.model, "\t", key.file, "\t", libtorch_version_, "\t",
                    reason.ToString(), "\n");
  }
  return out;
}

std::optional<FallbackReason> UnsupportedOpTable::Lookup(const std::string& model, const std::string& file,
                                                         DeviceKind kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(Key{kind, model, file});
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> UnsupportedOpTable::ForKind(DeviceKind kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [key, reason] : entries_) {
    if (key.kind != kind) continue;
    std::string entry = absl::StrCat(
        key.model, ":", reason.detail.empty() ? FallbackKindName(reason.kind) : absl::string_view(reason.detail));
    if (std::find(out.begin(), out.end(), entry) == out.end()) out.push_back(std::move(entry));  // one per version
  }
  return out;
}

absl::Status UnsupportedOpTable::last_write_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_write_;
}

}  // namespace infergate
