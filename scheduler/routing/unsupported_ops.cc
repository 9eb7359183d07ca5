#include "scheduler/routing/unsupported_ops.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace infergate {
namespace {

constexpr char kLimitSection[] = "limit";  // kind, model, model file, libtorch, reason

std::optional<DeviceKind> KindFromName(absl::string_view name) {
  for (DeviceKind k : {DeviceKind::kCpu, DeviceKind::kCuda, DeviceKind::kMps}) {
    if (DeviceKindName(k) == name) return k;
  }
  return std::nullopt;
}

}  // namespace

UnsupportedOpTable::UnsupportedOpTable(std::string state_file, std::string libtorch_version)
    : UnsupportedOpTable(std::make_shared<StateFile>(std::move(state_file)), std::move(libtorch_version)) {}

UnsupportedOpTable::UnsupportedOpTable(std::shared_ptr<StateFile> state_file, std::string libtorch_version)
    : state_file_(std::move(state_file)), libtorch_version_(std::move(libtorch_version)) {}

absl::Status UnsupportedOpTable::Load() {
  RETURN_IF_ERROR(state_file_->Load());
  std::map<Key, FallbackReason> loaded;
  size_t stale = 0;
  size_t line_no = 0;
  std::vector<std::string> lines = state_file_->Section(kLimitSection);
  std::vector<std::string> v2 = state_file_->Section("");  // the same fields, untagged
  lines.insert(lines.end(), v2.begin(), v2.end());
  for (const std::string& line : lines) {
    ++line_no;
    std::vector<std::string> parts = absl::StrSplit(line, '\t');
    if (parts.size() == 3) {  // v1: learned for no particular file or LibTorch
      ++stale;
      continue;
    }
    std::optional<DeviceKind> kind = parts.size() == 5 ? KindFromName(parts[0]) : std::nullopt;
    std::optional<FallbackReason> reason = parts.size() == 5 ? FallbackReason::Parse(parts[4]) : std::nullopt;
    if (!kind || parts[1].empty() || !reason) {
      return absl::DataLossError(absl::StrCat("state file ", state_file_->path(), ": learned device limit ", line_no,
                                              " is malformed: '", line, "'"));
    }
    if (parts[3] != libtorch_version_) {
      ++stale;
      continue;
    }
    loaded[{*kind, parts[1], parts[2]}] = *std::move(reason);
  }
  if (stale > 0) {
    LOG_INFO << "state file " << state_file_->path() << ": " << stale << " learned device limit(s) from another "
             << "LibTorch version or an older format dropped; those models are tried on the device again";
  }
  uint64_t snapshot = 0;
  {
    MutexLock lock(mu_);
    entries_ = std::move(loaded);
    size_.store(entries_.size(), std::memory_order_release);
    if (!v2.empty()) snapshot = state_file_->Stage(kLimitSection, Render());
  }
  if (snapshot != 0) (void)state_file_->Write(snapshot);
  return absl::OkStatus();
}

bool UnsupportedOpTable::Record(const std::string& model, const std::string& file, DeviceKind kind,
                                const FallbackReason& reason) {
  uint64_t snapshot = 0;
  {
    MutexLock lock(mu_);
    auto [it, inserted] = entries_.emplace(Key{kind, model, file}, reason);
    if (!inserted) return false;
    size_.store(entries_.size(), std::memory_order_release);
    snapshot = state_file_->Stage(kLimitSection, Render());  // in the order of the changes
  }
  absl::Status written = state_file_->Write(snapshot);
  if (!written.ok()) LOG_WARNING << "cannot persist learned device limits: " << written.message();
  return true;
}

std::vector<std::string> UnsupportedOpTable::Render() const {
  std::vector<std::string> out;
  for (const auto& [key, reason] : entries_) {
    out.push_back(absl::StrCat(DeviceKindName(key.kind), "\t", key.model, "\t", key.file, "\t", libtorch_version_, "\t",
                               reason.ToString()));
  }
  return out;
}

std::optional<FallbackReason> UnsupportedOpTable::Lookup(const std::string& model, const std::string& file,
                                                         DeviceKind kind) const {
  MutexLock lock(mu_);
  auto it = entries_.find(Key{kind, model, file});
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> UnsupportedOpTable::ForKind(DeviceKind kind) const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [key, reason] : entries_) {
    if (key.kind != kind) continue;
    std::string entry = absl::StrCat(
        key.model, ":", reason.detail.empty() ? FallbackKindName(reason.kind) : absl::string_view(reason.detail));
    if (std::find(out.begin(), out.end(), entry) == out.end()) out.push_back(std::move(entry));  // one per version
  }
  return out;
}

absl::Status UnsupportedOpTable::last_write_status() const { return state_file_->last_write_status(); }

}  // namespace infergate
