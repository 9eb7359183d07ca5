#pragma once
// A TorchServe or KServe V1 instance (a nested rectangular list of JSON
// numbers) decoded from its text, as InstanceTensor (instance_codec.h)
// decodes its tree. Building that tree is most of such a request's cost on
// a body of numbers (docs/benchmarks.md); here the lists are walked for
// their shape and the numbers read by the numeric data reader
// (service/call/numeric_json_data.h), which decodes each exactly as the
// tree's decoding would. Whatever the walk or the reader is unsure of
// (bools, strings, objects, a ragged list, a number the dtype does not
// hold, a shape past the limits, BOOL and BYTES inputs) gives nullopt, and
// the caller decodes the tree, whose answers and errors (naming the place
// at fault) stand: the text path changes no answer, only the time.
// Pure function; thread-safe.

#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "devices/dtype.h"
#include "service/call/wire_tensor.h"

namespace infergate {

// `text` (a JSON list, whitespace around it allowed) as a tensor of
// `dtype`; nullopt where the tree must decide.
std::optional<at::Tensor> InstanceTensorFromText(absl::string_view text, DType dtype, const CodecLimits& limits);

// The texts of a KServe V1 body's instances (`{"instances": [list, ...]}`,
// other members allowed), each a JSON list, in order; nullopt where the
// body is anything else or the walk is unsure of what the tree would hold
// (an escape in a key, "instances" twice, an instance that is not a list,
// no instances, the rest of the body not JSON the tree would take).
std::optional<std::vector<absl::string_view>> V1InstanceTexts(absl::string_view body);

}  // namespace infergate
