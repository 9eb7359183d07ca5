#pragma once
// A load request's `config` parameter: Triton's model configuration in its
// JSON form, read as an override of the repository's config
// (scheduler/triton_config.h has the field-by-field mapping). Errors are
// INVALID_ARGUMENT naming the field ("parameters.config.input[0].dims").
//
// Threading: a pure function.

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/config_override.h"

namespace infergate {

absl::StatusOr<ConfigOverride> ConfigOverrideFromTritonJson(absl::string_view json, absl::string_view model);

}  // namespace infergate
