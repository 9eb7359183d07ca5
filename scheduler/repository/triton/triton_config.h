#pragma once
// Triton's model configuration, as a tree (its JSON form, or its
// config.pbtxt read by text_proto_json.h), read as infergate's: the fields
// it sets, to lay over a config (config_override.h). Field by field:
//
//   name                     must be the model's name
//   platform, backend        pytorch_libtorch / pytorch (or absent)
//   max_batch_size           max_batch_size
//   input, output            inputs, outputs: name, data_type (TYPE_FP32,
//                            ..., TYPE_STRING for List[str]), dims, format
//                            (kept, for the echo), reshape (the model's
//                            shape; Triton's rules), output label_filename;
//                            `optional: false`, `is_shape_tensor: false`
//                            are accepted as the defaults they are
//   dynamic_batching         dynamic_batching.max_queue_delay_us (from
//                            max_queue_delay_microseconds),
//                            preferred_batch_sizes (preferred_batch_size),
//                            and its priority_levels and
//                            default_priority_level
//   instance_group           devices: KIND_CPU "cpu", KIND_GPU "cuda:N" for
//                            each of `gpus` (or "cuda"), KIND_AUTO any; a
//                            GPU or AUTO group's `count` is
//                            accelerator_instances (the largest when
//                            several say); a CPU group's count is accepted
//                            and not used (the CPU's workers are sized to
//                            its cores and run any model's batches)
//   version_policy           version_policy (latest, all, specific)
//   model_warmup             warmup and warmup_samples: each sample's inputs
//                            (zero_data, random_data, input_data_file in
//                            the model's warmup/ folder), batch_size, count
//   default_model_filename   "model.pt" only
//   parameters               INFERENCE_MODE "true" (always so here);
//                            DISABLE_OPTIMIZED_EXECUTION "true" or "false":
//                            torchscript_optimization OFF or AUTO
//
// Before any of that, Triton's own rules (triton_config_rules.h) refuse a
// config Triton refuses, in Triton's words. Any other field
// (sequence_batching, ensemble_scheduling, batch_input, other parameters,
// response_cache, ...) is refused with INVALID_ARGUMENT naming it, never
// ignored. The result still goes through the config checks
// (CheckModelConfig) when it is applied.
//
// Threading: a pure function.

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/repository/config_override.h"

namespace infergate {

// `source` starts each message ("parameters.config", "config.pbtxt").
absl::StatusOr<ConfigOverride> ReadTritonConfig(const nlohmann::json& config, absl::string_view model,
                                                absl::string_view source);

// Whether a config tree is Triton's rather than infergate's: it has a field
// only Triton's schema has (platform, backend, input, output, ...).
bool LooksLikeTritonConfig(const nlohmann::json& config);

}  // namespace infergate
