#include "scheduler/routing/output_comparison.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/model/string_tensor.h"

namespace infergate {

AccuracyMeasurement CompareOutputs(const std::vector<NamedTensor>& reference,
                                   const std::vector<NamedTensor>& candidate) {
  AccuracyMeasurement m;
  if (reference.size() != candidate.size()) {
    m.problem =
        absl::StrCat("the reduced-precision run returned ", candidate.size(), " outputs, FP32 ", reference.size());
    return m;
  }
  for (const NamedTensor& ref : reference) {
    const NamedTensor* cand = nullptr;
    for (const NamedTensor& c : candidate) {
      if (c.name == ref.name) cand = &c;
    }
    if (!cand) {
      m.problem = absl::StrCat("the reduced-precision run returned no output '", ref.name, "'");
      return m;
    }
    if (cand->tensor.sizes() != ref.tensor.sizes()) {
      m.problem = absl::StrCat("output '", ref.name, "' has shape [", absl::StrJoin(cand->tensor.sizes(), ","),
                               "] in reduced precision, [", absl::StrJoin(ref.tensor.sizes(), ","), "] in FP32");
      return m;
    }
    OutputError e;
    e.output = ref.name;
    if (IsStringTensor(ref.tensor) || IsStringTensor(cand->tensor)) {
      // Strings have no error to measure: the same strings, or a problem.
      if (!IsStringTensor(ref.tensor) || !IsStringTensor(cand->tensor) ||
          StringElements(ref.tensor) != StringElements(cand->tensor)) {
        m.problem = absl::StrCat("output '", ref.name, "' holds other strings in reduced precision than in FP32");
        return m;
      }
    } else if (ref.tensor.numel() > 0) {
      at::Tensor r = ref.tensor.to(at::kDouble);
      at::Tensor c = cand->tensor.to(at::kDouble);
      at::Tensor r_finite = at::isfinite(r);
      at::Tensor c_finite = at::isfinite(c);
      e.new_non_finite = at::logical_and(r_finite, at::logical_not(c_finite)).any().item<bool>();
      at::Tensor both = at::logical_and(r_finite, c_finite);
      if (both.any().item<bool>()) {
        e.max_abs_error = (c - r).abs().masked_select(both).max().item<double>();
        e.reference_magnitude = r.abs().masked_select(r_finite).max().item<double>();
      }
    }
    m.outputs.push_back(std::move(e));
  }
  return m;
}

}  // namespace infergate
