#pragma once
// String tensors: BYTES on the wire (Triton's TYPE_STRING), List[str] to a
// TorchScript model.
//
// Inside the server every tensor is an at::Tensor, so one of strings is
// one too: a CPU tensor of int64 with the tensor's shape whose elements
// refer to byte strings, and whose storage owns those strings (or keeps the
// bytes they alias alive). Shape checks, batching's row counts, reshape,
// narrow and views work on it unchanged, and a view keeps the strings
// alive. What must not happen to it is arithmetic, a dtype conversion or a
// copy to a device: the loaders turn it into List[str] instead
// (ToStringList), and the codecs read it with StringElements.
//
// A string tensor is recognised by its storage (IsStringTensor), so a
// view of one is one; at::cat and clone() make plain int64 tensors, so
// batches are joined with JoinStringTensors.
//
// Thread-safety: a string tensor is immutable once made; it may be read
// from any thread, like any tensor.

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "devices/dtype.h"
#include "scheduler/model/tensor_types.h"

namespace infergate {

// A tensor of `shape` owning `strings` (row-major; their count must be the
// shape's element count).
at::Tensor MakeStringTensor(std::vector<std::string> strings, const std::vector<int64_t>& shape);

// A tensor of `shape` over `views`, which alias bytes the caller keeps
// alive for as long as the tensor and its views are used (a request's
// message, as TensorOverBytes).
at::Tensor StringTensorOver(std::vector<absl::string_view> views, const std::vector<int64_t>& shape);

bool IsStringTensor(const at::Tensor& tensor);

// kBytes for a string tensor, else the dtype of its scalar type (nullopt
// for one the server does not serve).
std::optional<DType> TensorDType(const at::Tensor& tensor);

// The strings of a string tensor (or any view of one), row-major. They
// stay valid while `tensor` or its storage lives.
std::vector<absl::string_view> StringElements(const at::Tensor& tensor);

// The tensors joined along dimension 0, as at::cat would; all must be
// string tensors with the same trailing dims. The result keeps the parts'
// strings alive (no copy of them).
at::Tensor JoinStringTensors(const std::vector<at::Tensor>& parts);

// What a TorchScript model takes for a string input: one str per element,
// row-major.
c10::List<std::string> ToStringList(const at::Tensor& tensor);

// A 1-D string tensor of a model's List[str] result.
at::Tensor FromStringList(const c10::List<std::string>& list);

// INVALID_ARGUMENT naming the input ("inputs[1] 'text'"), the element and
// the byte when a string input is not valid UTF-8: a TorchScript model
// takes each string as a str.
absl::Status CheckStringsAreText(const std::vector<NamedTensor>& inputs, absl::string_view model);

// Memory a request's string inputs make the server hold beyond the
// message's own bytes: per element, its reference and the List[str] entry
// the model is given (with the string copied into it). Charged to the
// in-flight budget before the request reaches the core.
uint64_t StringInputHeldBytes(const std::vector<NamedTensor>& inputs);

}  // namespace infergate
