#pragma once
// Reading and checking a model's config.pbtxt.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "devices/device_id.h"
#include "infergate/v1/model_config.pb.h"
#include "infergate/v1/tensor.pb.h"
#include "proto/proto_enums.h"
#include "scheduler/repository/input_signature.h"

namespace infergate {

inline constexpr int kMaxTensorRank = 8;
// The most batches that may run at once on one accelerator: a model's
// accelerator_instances, and --accelerator-workers.
inline constexpr int kMaxAcceleratorInstances = 64;

// How a config's own `name` relates to the name its model is served under.
enum class ConfigNaming {
  // A repository's model folder: the name, when set, must be the folder's.
  kMatchesFolder,
  // A folder served under a name given from outside (ModelMesh's model id,
  // as Triton's ModelMesh adapter does): the config's name is replaced.
  kServedAs,
};

// Parses protobuf text format and checks it: unique non-empty tensor names,
// specified dtypes, dims of -1 or >= 1, rank <= kMaxTensorRank, name equal
// to `folder_name` when set (or replaced by it, per `naming`). Errors are
// INVALID_ARGUMENT naming the file's field, e.g. "inputs[1].dims[0]".
absl::StatusOr<v1::ModelConfig> ParseModelConfig(absl::string_view text, absl::string_view folder_name,
                                                 ConfigNaming naming = ConfigNaming::kMatchesFolder);

// The checks ParseModelConfig makes, on a config from elsewhere (a load
// request's override); errors start with `source` ("config.pbtxt").
absl::StatusOr<v1::ModelConfig> CheckModelConfig(v1::ModelConfig config, absl::string_view folder_name,
                                                 absl::string_view source);

// Whether the config lets the model run on `device`: its kind is in
// allowed_devices and it is one of `devices` (each list empty allows all).
bool DeviceAllowed(const v1::ModelConfig& config, const DeviceId& device);

// What a config declares about a model's inputs, as a signature (inputs in
// the config's order; empty when the config declares none).
InputSignature DeclaredSignature(const v1::ModelConfig& config);

}  // namespace infergate
