#pragma once
// Triton's classification extension: an output answered as its top k
// classes instead of as a tensor. Each row of the output (each batch row
// for a batched model, else the whole output) is one set of class scores,
// flattened; its k highest values are the answer, highest first, ties in
// index order, NaN last. Over the Open Inference Protocol each class is a
// BYTES element "score:index[:label]" (the score printed as C's "%f" for
// floating outputs, as Triton does), shape [rows, k] for a batched model
// and [k] otherwise; infergate.v1 answers the same classes as messages.
//
// Threading: pure functions.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

struct ClassScore {
  uint64_t index = 0;
  double score = 0;
  std::string score_text;  // as Triton prints it
  std::string label;       // empty without a label for the index
};

// The top `k` classes of each row of `output` (a CPU tensor of numbers).
// INVALID_ARGUMENT naming `field` for an output that holds no numbers.
absl::StatusOr<std::vector<std::vector<ClassScore>>> TopClasses(const at::Tensor& output, bool batched, uint64_t k,
                                                                const std::vector<std::string>* labels,
                                                                absl::string_view field);

// The classes as an Open Inference BYTES tensor: its raw contents (each
// element a 4-byte little-endian length, then the bytes) and its shape.
struct ClassBytes {
  std::string raw;
  std::vector<int64_t> shape;
};
ClassBytes ClassesAsBytes(const std::vector<std::vector<ClassScore>>& rows, bool batched);

}  // namespace infergate
