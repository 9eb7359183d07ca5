#include "scheduler/unsupported_ops.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/logging.h"

namespace infergate {
namespace {

constexpr char kHeader[] = "# infergate learned device limits v1: kind<TAB>model<TAB>reason";

std::optional<DeviceKind> KindFromName(absl::string_view name) {
  for (DeviceKind k : {DeviceKind::kCpu, DeviceKind::kCuda, DeviceKind::kMps}) {
    if (DeviceKindName(k) == name) return k;
  }
  return std::nullopt;
}

}  // namespace

UnsupportedOpTable::UnsupportedOpTable(std::string state_file) : state_file_(std::move(state_file)) {}

absl::Status UnsupportedOpTable::Load() {
  if (state_file_.empty()) return absl::OkStatus();
  std::error_code ec;
  if (!std::filesystem::exists(state_file_, ec)) return absl::OkStatus();  // first start
  absl::StatusOr<std::string> text = ReadFile(state_file_, "state file");
  if (!text.ok()) return text.status();
  std::map<std::pair<std::string, DeviceKind>, FallbackReason> loaded;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> parts = absl::StrSplit(line, '\t');
    std::optional<DeviceKind> kind = parts.size() == 3 ? KindFromName(parts[0]) : std::nullopt;
    std::optional<FallbackReason> reason = parts.size() == 3 ? FallbackReason::Parse(parts[2]) : std::nullopt;
    if (!kind || parts[1].empty() || !reason) {
      return absl::DataLossError(absl::StrCat("state file ", state_file_, " line ", line_no, " is malformed"));
    }
    loaded[{parts[1], *kind}] = *std::move(reason);
  }
  std::lock_guard<std::mutex> lock(mu_);
  entries_ = std::move(loaded);
  return absl::OkStatus();
}

bool UnsupportedOpTable::Record(const std::string& model, DeviceKind kind, const FallbackReason& reason) {
  std::string text;
  uint64_t version = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = entries_.emplace(std::make_pair(model, kind), reason);
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
    absl::StrAppend(&out, DeviceKindName(key.second), "\t", key.first, "\t", reason.ToString(), "\n");
  }
  return out;
}

std::optional<FallbackReason> UnsupportedOpTable::Lookup(const std::string& model, DeviceKind kind) const {
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
    out.push_back(absl::StrCat(key.first, ":", reason.detail.empty() ? FallbackKindName(reason.kind) : absl::string_view(reason.detail)));
  }
  return out;
}

absl::Status UnsupportedOpTable::last_write_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_write_;
}

}  // namespace infergate
