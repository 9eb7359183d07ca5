#include "service/torchserve/torchserve_models.h"

#include <ATen/ATen.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/proto_enums.h"
#include "service/torchserve/instance_codec.h"

namespace infergate {

absl::StatusOr<at::Tensor> PredictionTarget::Input(const std::vector<at::Tensor>& rows, size_t first, size_t count,
                                                   absl::string_view field) const {
  if (max_batch_size == 0) return rows[first];
  return StackInstances(rows, first, count, field);
}

const TorchServeModel* TorchServeModels::Archived(const std::string& name) const {
  if (catalog_ == nullptr) return nullptr;
  auto it = catalog_->models.find(name);
  return it == catalog_->models.end() ? nullptr : &it->second;
}

absl::StatusOr<PredictionTarget> TorchServeModels::Resolve(const std::string& model, const std::string& version) const {
  PredictionTarget t;
  t.model = model;
  if (catalog_ != nullptr && (Archived(model) != nullptr || !core_.KnownModel(model))) {
    ASSIGN_OR_RETURN(t.version, catalog_->RepositoryVersion(model, version));
    t.handler = Archived(model)->handler;
  } else {
    int64_t n = 0;
    if (!version.empty() && (!absl::SimpleAtoi(version, &n) || n < 1)) {
      return absl::NotFoundError(absl::StrCat("Model version '", version.substr(0, 64), "' of model '",
                                              model.substr(0, 128), "' not found (its versions are numbers)"));
    }
    t.version = version;
  }
  absl::StatusOr<ModelStatus> status = core_.Model(model, t.version);
  if (!status.ok()) {
    if (!core_.KnownModel(model))
      return absl::NotFoundError(absl::StrCat("Model not found: '", model.substr(0, 128), "'"));
    return status.status();
  }
  t.max_batch_size = status->config.max_batch_size();
  if (status->config.inputs_size() > 0) {
    if (std::optional<DType> d = DTypeFromProto(status->config.inputs(0).dtype())) t.input_dtype = *d;
  }
  return t;
}

std::vector<std::pair<std::string, int64_t>> TorchServeModels::VersionNames(const ModelStatus& status) const {
  std::vector<std::pair<std::string, int64_t>> out;
  if (const TorchServeModel* archived = Archived(status.name)) {
    for (const auto& [name, number] : archived->versions) out.emplace_back(name, number);
    return out;
  }
  for (const VersionStatus& v : status.states) out.emplace_back(absl::StrCat(v.version), v.version);
  return out;
}

bool TorchServeModels::IsDefaultVersion(const ModelStatus& status, const std::string& name, int64_t number) const {
  if (const TorchServeModel* archived = Archived(status.name)) return name == archived->default_version;
  return !status.versions.empty() && number == status.versions.back();
}

}  // namespace infergate
