#include "scheduler/cache/model_footprints.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace infergate {
namespace {

constexpr char kSection[] = "footprint";

std::optional<DeviceKind> KindNamed(absl::string_view name) {
  for (DeviceKind k : {DeviceKind::kCpu, DeviceKind::kCuda, DeviceKind::kMps}) {
    if (DeviceKindName(k) == name) return k;
  }
  return std::nullopt;
}

std::optional<DType> DTypeNamed(absl::string_view name) {
  for (DType d : kAllDTypes) {
    if (DTypeName(d) == name) return d;
  }
  return std::nullopt;
}

}  // namespace

ModelFootprints::ModelFootprints(std::shared_ptr<StateFile> state_file, std::string libtorch_version)
    : state_file_(std::move(state_file)), libtorch_version_(std::move(libtorch_version)) {}

absl::Status ModelFootprints::Load() {
  std::map<Key, Sizes> loaded;
  size_t line_no = 0;
  for (const std::string& line : state_file_->Section(kSection)) {
    ++line_no;
    std::vector<std::string> parts = absl::StrSplit(line, '\t');
    std::optional<DeviceKind> kind = parts.size() == 7 ? KindNamed(parts[0]) : std::nullopt;
    std::optional<DType> dtype = parts.size() == 7 ? DTypeNamed(parts[1]) : std::nullopt;
    Sizes sizes;
    if (!kind || !dtype || parts[2].empty() || !absl::SimpleAtoi(parts[5], &sizes.parameter_bytes) ||
        !absl::SimpleAtoi(parts[6], &sizes.activation_bytes)) {
      return absl::DataLossError(absl::StrCat("state file ", state_file_->path(), ": model footprint ", line_no,
                                              " is malformed: '", line, "'"));
    }
    if (parts[4] != libtorch_version_) continue;  // another LibTorch may lay tensors out differently
    loaded[{*kind, *dtype, parts[2], parts[3]}] = sizes;
  }
  MutexLock lock(mu_);
  entries_ = std::move(loaded);
  return absl::OkStatus();
}

Footprint ModelFootprints::Estimate(uint64_t file_bytes, DType dtype) {
  return {file_bytes / 4 * ElementSize(dtype) + file_bytes % 4, 0,
          absl::StrCat("estimated from the ", file_bytes, "-byte model file")};
}

Footprint ModelFootprints::Expect(const std::string& model, const std::string& file, uint64_t file_bytes,
                                  DeviceKind kind, DType dtype) const {
  {
    MutexLock lock(mu_);
    auto it = entries_.find(Key{kind, dtype, model, file});
    if (it != entries_.end() && it->second.parameter_bytes > 0) {
      return {it->second.parameter_bytes, it->second.activation_bytes, "learned from an earlier load"};
    }
  }
  return Estimate(file_bytes, dtype);
}

void ModelFootprints::RecordParameters(const std::string& model, const std::string& file, DeviceKind kind, DType dtype,
                                       uint64_t bytes) {
  Update({kind, dtype, model, file}, bytes, 0);
}

void ModelFootprints::RecordActivations(const std::string& model, const std::string& file, DeviceKind kind, DType dtype,
                                        uint64_t bytes) {
  Update({kind, dtype, model, file}, 0, bytes);
}

void ModelFootprints::Update(const Key& key, uint64_t parameter_bytes, uint64_t activation_bytes) {
  uint64_t snapshot = 0;
  {
    MutexLock lock(mu_);
    Sizes& sizes = entries_[key];
    bool changed = false;
    if (parameter_bytes > 0 && parameter_bytes != sizes.parameter_bytes) {
      sizes.parameter_bytes = parameter_bytes;
      changed = true;
    }
    if (activation_bytes > sizes.activation_bytes) {
      sizes.activation_bytes = activation_bytes;
      changed = true;
    }
    if (!changed || sizes.parameter_bytes == 0) return;  // written once the load measured the parameters
    snapshot = state_file_->Stage(kSection, Render());   // in the order of the changes
  }
  absl::Status written = state_file_->Write(snapshot);
  if (!written.ok()) LOG_WARNING << "cannot persist learned model sizes: " << written.message();
}

std::vector<std::string> ModelFootprints::Render() const {
  std::vector<std::string> out;
  for (const auto& [key, sizes] : entries_) {
    if (sizes.parameter_bytes == 0) continue;
    out.push_back(absl::StrCat(DeviceKindName(key.kind), "\t", DTypeName(key.dtype), "\t", key.model, "\t", key.file,
                               "\t", libtorch_version_, "\t", sizes.parameter_bytes, "\t", sizes.activation_bytes));
  }
  return out;
}

}  // namespace infergate
