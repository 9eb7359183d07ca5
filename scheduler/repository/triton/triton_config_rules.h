#pragma once
// Triton's own rules for a model configuration, checked on the config's
// tree before infergate reads it (triton_config.h), so that a config Triton
// refuses is refused here for Triton's reason, in Triton's words: a client
// or an operator moving a repository sees the message Triton's
// documentation and issues use. The rules cover the fields infergate reads
// and also those it refuses as not supported (batch_input, batch_output,
// sequence_batching, ensemble_scheduling, preserve_ordering,
// priority_queue_policy): a broken one is refused for what is broken, a
// sound one for being unsupported.
//
//   rule (Triton's text, then " for <model>" where Triton says so)
//   max_batch_size >= 0          'max_batch_size' must be non-negative value
//   input/output data_type set   model input 'x' must specify 'data_type'
//   batch_input                  batch input kind 'K' expects 1 source input, got N;
//                                unknown batch input kind 'K';
//                                unknown source input name 'x'
//   batch_output                 batch output kind 'K' expects 1 source input, got N;
//                                unknown source input name 'x';
//                                unknown target output name 'y';
//                                target output name 'y' can only be specified once
//   dynamic_batching             default priority level must be in range [1, L];
//                                priority queue policy must have priority level in range [1, L];
//                                Only one priority level is allowed when 'preserve_ordering' is true;
//                                Queue policy can not have DELAY as timeout action when
//                                'preserve_ordering' is true
//   sequence_batching controls   sequence batching specifies multiple <KIND> tensors;
//                                sequence batching control tensor 'x' is specified for
//                                multiple control kinds; sequence batching must specify
//                                either 'int32_false_true', 'fp32_false_true' or
//                                'bool_false_true' for <KIND>
//   ensemble_scheduling          ensemble scheduling cannot be set for model 'm' whose
//                                platform is not ensemble
//   instance_group               instance group g of model m has kind KIND_CPU but
//                                specifies one or more GPUs; ... specifies invalid or
//                                unsupported gpu id -1 (and, with the server's devices
//                                known, CheckTritonGpuIds: an id that is none of them)
//
// Messages are "<source>: <field>: <Triton's text>", INVALID_ARGUMENT.
//
// Threading: a pure function.

#include <nlohmann/json.hpp>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace infergate {

absl::Status CheckTritonRules(const nlohmann::json& config, absl::string_view model, absl::string_view source);

// Triton's rule for the GPUs an instance group names, which needs the
// server's devices: each id must be one of `cuda_indices` (this server's
// CUDA devices, real or simulated). A KIND_GPU group naming no ids is left
// to infergate's placement (it runs where a device is, falling back as the
// request allows), where Triton would refuse it on a machine without GPUs.
absl::Status CheckTritonGpuIds(const nlohmann::json& config, absl::string_view model, absl::string_view source,
                               const std::vector<int64_t>& cuda_indices);

}  // namespace infergate
