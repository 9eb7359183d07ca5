#include "scheduler/model/declared_outputs.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "devices/torch_dtype.h"
#include "proto/proto_enums.h"
#include "scheduler/model/string_tensor.h"

namespace infergate {

DeclaredOutputs::DeclaredOutputs(const v1::ModelConfig& config) {
  for (const v1::TensorSpec& s : config.outputs()) {
    names_.push_back(s.name());
    dtypes_.push_back(DTypeFromProto(s.dtype()));
    dims_.emplace_back(s.dims().begin(), s.dims().end());
  }
}

absl::StatusOr<std::vector<int64_t>> DeclaredOutputs::StringShape(const std::string& model, const std::string& name,
                                                                  size_t slot, int64_t elements,
                                                                  int64_t batch_rows) const {
  std::vector<int64_t> shape;
  if (batch_rows > 0) shape.push_back(batch_rows);
  if (slot == names_.size()) {  // undeclared
    if (batch_rows <= 0) return std::vector<int64_t>{elements};
    if (elements % batch_rows == 0) return std::vector<int64_t>{batch_rows, elements / batch_rows};
  } else {
    int64_t known = batch_rows > 0 ? batch_rows : 1;
    std::optional<size_t> free;
    bool ambiguous = false;
    for (int64_t d : dims_[slot]) {
      if (d < 0) {
        ambiguous |= free.has_value();
        free = shape.size();
        d = 1;
      } else {
        known *= d;
      }
      shape.push_back(d);
    }
    if (!ambiguous && known > 0 && elements % known == 0 && (free || elements == known)) {
      if (free) shape[*free] = elements / known;
      return shape;
    }
    if (!ambiguous && known == 0 && elements == 0) return shape;
  }
  return absl::InternalError(absl::StrCat("model '", model, "' returned ", elements, " strings for output '", name,
                                          "', which do not fill its shape (", batch_rows, " rows; declared dims [",
                                          slot == names_.size() ? "" : absl::StrJoin(dims_[slot], ","), "])"));
}

absl::StatusOr<std::vector<NamedTensor>> DeclaredOutputs::ToAnswer(const std::string& model,
                                                                   std::vector<std::pair<std::string, at::Tensor>> raw,
                                                                   int64_t batch_rows) const {
  if (!names_.empty() && names_.size() != raw.size()) {
    return absl::InternalError(absl::StrCat("model '", model, "' returned ", raw.size(),
                                            " outputs but config.pbtxt declares ", names_.size()));
  }
  std::vector<NamedTensor> outputs;
  outputs.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    auto& [name, tensor] = raw[i];
    std::optional<DType> declared;
    size_t slot = names_.size();
    if (!names_.empty()) {
      slot = i;
      if (!name.empty()) {  // outputs returned by key match declared names by key
        slot = names_.size();
        for (size_t s = 0; s < names_.size(); ++s) {
          if (names_[s] == name) slot = s;
        }
        if (slot == names_.size()) {
          return absl::InternalError(
              absl::StrCat("model '", model, "' returned output '", name, "' that config.pbtxt does not declare"));
        }
      }
      name = names_[slot];
      declared = dtypes_[slot];
    } else if (name.empty()) {
      name = absl::StrCat("output", i);
    }
    const bool strings = IsStringTensor(tensor);
    if (declared && (*declared == DType::kBytes) != strings) {
      return absl::InternalError(absl::StrCat("model '", model, "' returned ", strings ? "List[str]" : "a Tensor",
                                              " for output '", name, "', which config.pbtxt declares ",
                                              *declared == DType::kBytes ? "TYPE_STRING" : DTypeName(*declared)));
    }
    if (strings) {
      ASSIGN_OR_RETURN(std::vector<int64_t> shape, StringShape(model, name, slot, tensor.numel(), batch_rows));
      outputs.push_back({std::move(name), tensor.reshape(shape)});
      continue;
    }
    at::ScalarType out_type = tensor.scalar_type();
    if (declared) {
      out_type = ToScalarType(*declared);
    } else if (tensor.is_floating_point()) {
      out_type = at::kFloat;
    }
    if (!FromScalarType(out_type)) {
      return absl::InternalError(absl::StrCat("model '", model, "' output '", name, "' has dtype ",
                                              c10::toString(out_type), " which the wire API cannot carry"));
    }
    outputs.push_back({std::move(name), tensor.to(at::kCPU, out_type).contiguous()});
  }
  return outputs;
}

}  // namespace infergate
