#include "scheduler/repository/repository_diff.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace infergate {
namespace {

ModelDiff DiffModel(const DiskModel* before, const DiskModel* after) {
  ModelDiff diff;
  diff.model = after ? after->name : before->name;
  if (!after) {
    diff.removed = true;
    for (const auto& [v, stamp] : before->versions) diff.versions_removed.push_back(v);
    return diff;
  }
  diff.added = before == nullptr;
  diff.config_changed = before ? !(before->config == after->config) : true;
  for (const auto& [v, stamp] : after->versions) {
    auto old = before ? before->versions.find(v) : after->versions.end();
    if (!before || old == before->versions.end()) {
      diff.versions_added.push_back(v);
    } else if (!(old->second == stamp)) {
      diff.versions_changed.push_back(v);
    }
  }
  if (before) {
    for (const auto& [v, stamp] : before->versions) {
      if (!after->versions.count(v)) diff.versions_removed.push_back(v);
    }
  }
  return diff;
}

bool Settled(const std::string& name, const DiskRepository& now, const DiskRepository* previous) {
  if (!previous) return true;
  auto a = now.find(name);
  auto b = previous->find(name);
  if (a == now.end() || b == previous->end()) return a == now.end() && b == previous->end();
  return a->second == b->second;
}

}  // namespace

bool ModelDiff::empty() const {
  return !added && !removed && !config_changed && versions_added.empty() && versions_changed.empty() &&
         versions_removed.empty();
}

std::string ModelDiff::ToString() const {
  std::vector<std::string> parts;
  if (added) parts.push_back("new model");
  if (removed) parts.push_back("folder removed");
  if (config_changed && !added) parts.push_back("config.pbtxt changed");
  auto list = [&](const std::vector<int64_t>& vs, const char* what) {
    if (!vs.empty())
      parts.push_back(absl::StrCat(vs.size() == 1 ? "version " : "versions ", absl::StrJoin(vs, ","), " ", what));
  };
  list(versions_added, "added");
  list(versions_changed, "changed");
  list(versions_removed, "removed");
  return absl::StrCat(model, ": ", absl::StrJoin(parts, ", "));
}

std::vector<ModelDiff> DiffRepository(const DiskRepository& known, const DiskRepository& now,
                                      const DiskRepository* previous) {
  std::vector<ModelDiff> out;
  for (const auto& [name, model] : now) {
    auto it = known.find(name);
    ModelDiff diff = DiffModel(it == known.end() ? nullptr : &it->second, &model);
    if (!diff.empty() && Settled(name, now, previous)) out.push_back(std::move(diff));
  }
  for (const auto& [name, model] : known) {
    if (!now.count(name) && Settled(name, now, previous)) out.push_back(DiffModel(&model, nullptr));
  }
  return out;
}

}  // namespace infergate
