#pragma once
// The JSON form of tensors in KServe's V1 protocol (`instances` in,
// `predictions` out) and TorchServe's base_handler (a JSON list in, the
// output's rows as lists out): an instance is a number, a bool, a string
// (for a BYTES input), or a nested rectangular list of them, and becomes
// one row of a batch.
// Pure functions; thread-safe.

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "devices/dtype.h"
#include "nlohmann/json.hpp"
#include "scheduler/model/tensor_types.h"
#include "service/call/wire_tensor.h"

namespace infergate {

// The tensor `value` holds, as `dtype` (what the model declares for its
// input; float32 when it declares none, as TorchServe's handlers make float
// tensors of lists). INVALID_ARGUMENT naming `where` ("instances[2][0]")
// for a ragged list, a value that is not a number or bool, a number that
// `dtype` cannot hold, or more elements or dims than `limits` allow.
absl::StatusOr<at::Tensor> InstanceTensor(const nlohmann::json& value, DType dtype, absl::string_view where,
                                          const CodecLimits& limits);

// Instances [first, first + count) of `rows` (each from InstanceTensor)
// stacked along a new leading dim; INVALID_ARGUMENT naming `field` and the
// first instance whose shape differs from the first's.
absl::StatusOr<at::Tensor> StackInstances(const std::vector<at::Tensor>& rows, size_t first, size_t count,
                                          absl::string_view field);

// Row `row` of a batched answer (every output's first dim is the batch),
// or the whole answer when `row` is negative: one output gives its values
// as nested lists, several give {"output name": values, ...}.
nlohmann::json PredictionJson(const std::vector<NamedTensor>& outputs, int64_t row);

// `tensor` (any dtype, on the CPU) as nested JSON lists; a scalar as a
// number. Floats that are not finite become null (JSON has no NaN).
nlohmann::json TensorJson(const at::Tensor& tensor);

}  // namespace infergate
