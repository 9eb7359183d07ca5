#include "scheduler/repository/input_signature.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace infergate {
namespace {

std::string ExpectedNames(const InputSignature& sig) {
  std::vector<std::string> names;
  for (const InputSpec& s : sig.inputs) names.push_back(s.name);
  return absl::StrCat("(", absl::StrJoin(names, ", "), ")");
}

// Triton's list of names: ['a','b'].
template <typename Names>
std::string QuotedList(const Names& names) {
  return absl::StrCat("[",
                      absl::StrJoin(names, ",",
                                    [](std::string* out, const auto& n) {
                                      absl::StrAppend(out, "'", absl::CHexEscape(absl::string_view(n).substr(0, 64)),
                                                      "'");
                                    }),
                      "]");
}

// The request's shape or the model's dims as Triton prints them: [-1,16].
std::string DimsText(std::span<const int64_t> dims) { return absl::StrCat("[", absl::StrJoin(dims, ","), "]"); }

std::string ShapeText(const InputSignature& sig, const InputSpec& spec) {
  std::vector<int64_t> full;
  if (sig.max_batch_size > 0) full.push_back(-1);
  full.insert(full.end(), spec.dims->begin(), spec.dims->end());
  return DimsText(full);
}

// Triton's words for a refused input, then infergate's: which field, and why.
absl::Status Refused(absl::string_view triton, absl::string_view field, absl::string_view detail) {
  return absl::InvalidArgumentError(absl::StrCat(triton, " (", field, ": ", detail, ")"));
}

absl::Status CheckOne(const InputSignature& sig, const InputSpec& spec, const TensorMeta& t, size_t index,
                      absl::string_view model) {
  const std::string field = absl::StrCat("inputs[", index, "]");
  const std::string quoted_name = absl::StrCat("'", spec.name, "'");
  if (spec.dtype && *spec.dtype != t.dtype) {
    return Refused(absl::StrCat("inference input ", quoted_name, " data-type is '", ProtocolDatatypeName(t.dtype),
                                "', but model '", model, "' expects '", ProtocolDatatypeName(*spec.dtype), "'"),
                   field + ".dtype",
                   absl::StrCat("model '", model, "' input ", quoted_name, " is ", DTypeName(*spec.dtype), ", got ",
                                DTypeName(t.dtype)));
  }
  size_t lead = sig.max_batch_size > 0 ? 1 : 0;
  if (lead && t.shape.empty()) {
    return Refused(
        absl::StrCat("input ", quoted_name, " has no shape but model requires batch dimension for '", model, "'"),
        field + ".shape", absl::StrCat("model '", model, "' input ", quoted_name, " needs a leading batch dimension"));
  }
  if (lead) {
    int64_t rows = t.shape[0];
    if (rows < 1 || rows > static_cast<int64_t>(sig.max_batch_size)) {
      return Refused(absl::StrCat("inference request batch-size must be <= ", sig.max_batch_size, " for '", model, "'"),
                     field + ".shape[0]",
                     absl::StrCat("batch of ", rows, " rows is outside 1..", sig.max_batch_size,
                                  " (max_batch_size of model '", model, "')"));
    }
  }
  if (!spec.dims) return absl::OkStatus();
  const std::vector<int64_t>& dims = *spec.dims;
  auto unexpected_shape = [&] {
    return absl::StrCat("unexpected shape for input ", quoted_name, " for model '", model, "'. Expected ",
                        ShapeText(sig, spec), ", got ", DimsText(t.shape));
  };
  if (t.shape.size() != dims.size() + lead) {
    return Refused(unexpected_shape(), field + ".shape",
                   absl::StrCat("model '", model, "' input ", quoted_name, " expects rank ", dims.size() + lead, " ",
                                ShapeText(sig, spec), ", got rank ", t.shape.size(), " ", DimsText(t.shape)));
  }
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] != -1 && dims[d] != t.shape[d + lead]) {
      return Refused(unexpected_shape(), absl::StrCat(field, ".shape[", d + lead, "]"),
                     absl::StrCat("model '", model, "' input ", quoted_name, " expects ", dims[d], " ",
                                  ShapeText(sig, spec), ", got ", t.shape[d + lead]));
    }
  }
  return absl::OkStatus();
}

// Triton's refusal of a request whose inputs are not the model's: which
// it got, which are missing.
std::string WrongInputsText(const InputSignature& sig, std::span<const TensorMeta> tensors, absl::string_view model) {
  std::vector<absl::string_view> got;
  for (const TensorMeta& t : tensors) got.push_back(t.name);
  std::vector<absl::string_view> missing;
  for (const InputSpec& s : sig.inputs) {
    if (std::none_of(tensors.begin(), tensors.end(), [&](const TensorMeta& t) { return t.name == s.name; })) {
      missing.push_back(s.name);
    }
  }
  return absl::StrCat("expected ", sig.inputs.size(), " inputs but got ", tensors.size(), " inputs for model '", model,
                      "'. Got input(s) ", QuotedList(got), ", but missing required input(s) ", QuotedList(missing),
                      ". Please provide all required input(s).");
}

}  // namespace

absl::StatusOr<std::vector<size_t>> MatchInputs(const InputSignature& sig, std::span<const TensorMeta> tensors,
                                                absl::string_view model) {
  if (tensors.size() != sig.inputs.size()) {
    return Refused(WrongInputsText(sig, tensors, model), "inputs",
                   tensors.empty() ? absl::StrCat("request has no inputs; model '", model, "' expects ",
                                                  sig.inputs.size(), " ", ExpectedNames(sig))
                                   : absl::StrCat("model '", model, "' expects ", sig.inputs.size(), " input(s) ",
                                                  ExpectedNames(sig), ", got ", tensors.size()));
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
      const std::string name = absl::CHexEscape(tensors[i].name.substr(0, 64));
      if (slot == sig.inputs.size()) {
        return Refused(absl::StrCat("unexpected inference input '", name, "' for model '", model, "'"),
                       absl::StrCat("inputs[", i, "].name"),
                       absl::StrCat("model '", model, "' has no input '", name, "'; expected ", ExpectedNames(sig)));
      }
      if (order[slot] != tensors.size()) {
        return Refused(WrongInputsText(sig, tensors, model), absl::StrCat("inputs[", i, "].name"),
                       absl::StrCat("input '", name, "' is given more than once"));
      }
      order[slot] = i;
    }
  }
  for (size_t s = 0; s < order.size(); ++s) {
    RETURN_IF_ERROR(CheckOne(sig, sig.inputs[s], tensors[order[s]], order[s], model));
  }
  if (sig.max_batch_size > 0) {
    int64_t rows = tensors[order[0]].shape[0];
    for (size_t s = 1; s < order.size(); ++s) {
      if (tensors[order[s]].shape[0] != rows) {
        return Refused(
            absl::StrCat("input '", sig.inputs[s].name, "' batch size does not match other inputs for '", model, "'"),
            absl::StrCat("inputs[", order[s], "].shape[0]"),
            absl::StrCat("batch of ", tensors[order[s]].shape[0], " rows differs from inputs[", order[0], "] with ",
                         rows));
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
