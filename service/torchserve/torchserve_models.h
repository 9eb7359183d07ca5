#pragma once
// Which model, version and handler a TorchServe or KServe V1 request runs
// on, shared by the REST (torchserve_rest.h) and gRPC (torchserve_grpc.h)
// front ends. Models from a TorchServe store are known by TorchServe's
// version names ("1.0") and run their archive's handler; any other
// repository model runs base_handler's rules with its version numbers.
//
// Thread-safe: const over the core's model view and the store's catalog.

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "devices/dtype.h"
#include "scheduler/core/inference_core.h"
#include "scheduler/model/inference_types.h"
#include "scheduler/repository/torchserve/torchserve_store.h"

namespace infergate {

struct PredictionTarget {
  std::string model;
  std::string version;  // the repository's version number; "" for the latest
  MarHandler handler = MarHandler::kBase;
  uint32_t max_batch_size = 0;          // 0: the model takes each instance alone
  DType input_dtype = DType::kFloat32;  // the model's first declared input, else float32

  // Instances [first, first + count) of `rows` as the model's input: stacked
  // into a batch, or the one instance as is for a model without batching.
  // INVALID_ARGUMENT naming `field` for instances of different shapes.
  absl::StatusOr<at::Tensor> Input(const std::vector<at::Tensor>& rows, size_t first, size_t count,
                                   absl::string_view field) const;
  // How many instances one call carries.
  size_t InstancesPerCall() const { return max_batch_size > 0 ? max_batch_size : 1; }
};

class TorchServeModels {
 public:
  // `catalog` may be null (no TorchServe store); both must outlive this.
  TorchServeModels(InferenceCore& core, const TorchServeCatalog* catalog) : core_(core), catalog_(catalog) {}

  // `model` at `version` (TorchServe's name for a store's model, a number
  // otherwise; "" the default). NOT_FOUND ("Model not found: ...") for an
  // unknown model or version, FAILED_PRECONDITION with the reason for an
  // archive that was refused, or the core's answer for a version that is
  // not served.
  absl::StatusOr<PredictionTarget> Resolve(const std::string& model, const std::string& version) const;

  // The names a model's versions go by, with their repository numbers, in
  // order; and whether `name` is the default one.
  std::vector<std::pair<std::string, int64_t>> VersionNames(const ModelStatus& status) const;
  bool IsDefaultVersion(const ModelStatus& status, const std::string& name, int64_t number) const;
  // The store's model `name`; null for a model that is not from archives.
  const TorchServeModel* Archived(const std::string& name) const;

 private:
  InferenceCore& core_;
  const TorchServeCatalog* const catalog_;
};

}  // namespace infergate
