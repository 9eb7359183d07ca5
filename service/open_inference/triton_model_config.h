#pragma once
// Triton's model configuration at the front ends: a load request's `config`
// parameter (its JSON form), read as an override of the repository's config
// (scheduler/repository/triton/triton_config.h has the field-by-field mapping), and a Triton
// config.pbtxt read back into the Open Inference Protocol's ModelConfig.
// Errors are INVALID_ARGUMENT naming the field
// ("parameters.config.input[0].dims").
//
// Threading: pure functions.

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"
#include "scheduler/repository/config_override.h"

namespace infergate {

absl::StatusOr<ConfigOverride> ConfigOverrideFromTritonJson(absl::string_view json, absl::string_view model);

// Reads a config.pbtxt written for Triton (already accepted by the
// repository) into `config`, as written: the fields the protocol's
// ModelConfig defines are kept, others skipped. False when it does not parse.
bool ReadTritonFields(const std::string& text, inference::ModelConfig* config);

}  // namespace infergate
