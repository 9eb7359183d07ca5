#include "absl/strings/string_view.h"
#include "scheduler/repository/input_signature.h"

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace infergate {
namespace {

std::string ExpectedNames(const InputSignature& sig) {
  std::vector<std::string> names;
  for (const InputSpec& s : sig.inputs) names.push_back(s.name);
  return absl::StrCat("(", absl::StrJoin(names, ", "), ")");
}

std::string ShapeText(const InputSignature& sig, const InputSpec& spec) {
  std::vector<int64_t> full;
  if (sig.max_batch_size > 0) full.push_back(-1);
  full.insert(full.end(), spec.dims->begin(), spec.dims->end());
  return absl::StrCat("[", absl::StrJoin(full, ","), "]");
}

absl::Status CheckOne(const InputSignature& sig, const InputSpec& spec, const TensorMeta& t, size_t index,
                      absl::string_view model) {
  std::string field = absl::StrCat("inputs[", index, "]");
  if (spec.dtype && *spec.dtype != t.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".dtype: model '", model, "' input '", spec.name,
                                                   "' is ", DTypeName(*spec.dtype), ", got ", DTypeName(t.dtype)));
  }
  size_t lead = sig.max_batch_size > 0 ? 1 : 0;
  if (lead && t.shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".shape: model '", model, "' input '", spec.name,
                                                   "' needs a leading batch dimension"));
  }
  if (lead) {
    int64_t rows = t.shape[0];
    if (rows < 1 || rows > static_cast<int64_t>(sig.max_batch_size)) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".shape[0]: batch of ", rows, " rows is outside 1..",
                                                     sig.max_batch_size, " (max_batch_size of model '", model,
                                                     "')"));
    }
  }
  if (!spec.dims) return absl::OkStatus();
  const std::vector<int64_t>& dims = *spec.dims;
  if (t.shape.size() != dims.size() + lead) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".shape: model '", model, "' input '", spec.name,
                                                   "' expects rank ", dims.size() + lead, " ",
                                                   ShapeText(sig, spec), ", got rank ", t.shape.size(), " [",
                                                   absl::StrJoin(t.shape, ","), "]"));
  }
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] != -1 && dims[d] != t.shape[d + lead]) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".shape[", d + lead, "]: model '", model,
                                                     "' input '", spec.name, "' expects ", dims[d], " ",
                                                     ShapeText(sig, spec), ", got ", t.shape[d + lead]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<size_t>> MatchInputs(const InputSignature& sig, std::span<const TensorMeta> tensors,
                                                absl::string_view model) {
  if (tensors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("inputs: request has no inputs; model '", model, "' expects ",
                                                   sig.inputs.size(), " ", ExpectedNames(sig)));
  }
  if (tensors.size() != sig.inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("inputs: model '", model, "' expects ", sig.inputs.size(),
                                                   " input(s) ", ExpectedNames(sig), ", got ", tensors.size()));
  }
  bool all_unnamed = true;
  for (const TensorMeta& t : tensors) all_unnamed = all_unnamed && t.name.empty();

  std::vector<size_t> order(sig.inputs.size(), tensors.size());
  if (all_unnamed) {
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  } else {
    for (size_t i = 0; i < tensors.size(); ++i) {
      size_t slot = sig.inputs.size();
      for (size_t s = 0; s < sig.inputs.size(); ++s) {
        if (sig.inputs[s].name == tensors[i].name) slot = s;
      }
      if (slot == sig.inputs.size()) {
        return absl::InvalidArgumentError(absl::StrCat("inputs[", i, "].name: model '", model,
                                                       "' has no input '", absl::CHexEscape(tensors[i].name.substr(0, 64)),
                                                       "'; expected ", ExpectedNames(sig)));
      }
      if (order[slot] != tensors.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("inputs[", i, "].name: input '", tensors[i].name, "' is given more than once"));
      }
      order[slot] = i;
    }
  }
  for (size_t s = 0; s < order.size(); ++s) {
    if (absl::Status st = CheckOne(sig, sig.inputs[s], tensors[order[s]], order[s], model); !st.ok()) return st;
  }
  if (sig.max_batch_size > 0) {
    int64_t rows = tensors[order[0]].shape[0];
    for (size_t s = 1; s < order.size(); ++s) {
      if (tensors[order[s]].shape[0] != rows) {
        return absl::InvalidArgumentError(absl::StrCat("inputs[", order[s], "].shape[0]: batch of ",
                                                       tensors[order[s]].shape[0], " rows differs from inputs[",
                                                       order[0], "] with ", rows));
      }
    }
  }
  return order;
}

int64_t BatchRows(const InputSignature& sig, std::span<const TensorMeta> tensors) {
  if (sig.max_batch_size == 0 || tensors.empty() || tensors[0].shape.empty()) return 1;
  return tensors[0].shape[0];
}

}  // namespace infergate
