#include "scheduler/model/declared_outputs.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "proto/proto_enums.h"
#include "devices/torch_dtype.h"

namespace infergate {

DeclaredOutputs::DeclaredOutputs(const v1::ModelConfig& config) {
  for (const v1::TensorSpec& s : config.outputs()) {
    names_.push_back(s.name());
    dtypes_.push_back(DTypeFromProto(s.dtype()));
  }
}

absl::StatusOr<std::vector<NamedTensor>> DeclaredOutputs::ToAnswer(
    const std::string& model, std::vector<std::pair<std::string, at::Tensor>> raw) const {
  if (!names_.empty() && names_.size() != raw.size()) {
    return absl::InternalError(absl::StrCat("model '", model, "' returned ", raw.size(),
                                            " outputs but config.pbtxt declares ", names_.size()));
  }
  std::vector<NamedTensor> outputs;
  outputs.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    auto& [name, tensor] = raw[i];
    std::optional<DType> declared;
    if (!names_.empty()) {
      size_t slot = i;
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
