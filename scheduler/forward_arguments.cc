#include "scheduler/forward_arguments.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace infergate {

absl::StatusOr<ForwardInputs> MatchForwardArguments(const std::string& model,
                                                    const std::vector<ForwardArgument>& arguments,
                                                    const InputSignature* declared, uint32_t max_batch_size) {
  const std::string where = absl::StrCat("model '", model, "': ");
  ForwardInputs out;
  out.signature.max_batch_size = max_batch_size;
  bool skipped = false;
  auto declared_spec = [&](const std::string& name) -> const InputSpec* {
    if (!declared) return nullptr;
    auto it = std::find_if(declared->inputs.begin(), declared->inputs.end(),
                           [&](const InputSpec& d) { return d.name == name; });
    return it == declared->inputs.end() ? nullptr : &*it;
  };
  for (const ForwardArgument& a : arguments) {
    const bool required_tensor = a.tensor && !a.has_default;
    const bool optional_input = (a.tensor && a.has_default) || a.optional_tensor;
    const InputSpec* spec = declared_spec(a.name);
    if (required_tensor || (optional_input && spec)) {
      if (declared && !spec) {
        return absl::FailedPreconditionError(
            absl::StrCat(where, "forward() argument '", a.name, "' is not declared in config.pbtxt inputs"));
      }
      out.signature.inputs.push_back(spec ? *spec : InputSpec{a.name, std::nullopt, std::nullopt});
      out.by_keyword |= skipped;
      continue;
    }
    if (spec) {
      return absl::FailedPreconditionError(absl::StrCat(where, "config.pbtxt input '", a.name,
                                                        "' is forward() argument of type ", a.type,
                                                        "; only Tensor and Optional[Tensor] arguments are inputs"));
    }
    if (a.optional_tensor && !a.has_default) {
      out.pass_none.push_back(a.name);
      out.by_keyword = true;
      skipped = true;
      continue;
    }
    if (!a.has_default) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, "forward() argument '", a.name, "' is ", a.type,
          " without a default; only Tensor and Optional[Tensor] arguments can come from a request"));
    }
    skipped = true;  // left at its default
  }
  if (declared) {
    for (const InputSpec& d : declared->inputs) {
      if (std::none_of(arguments.begin(), arguments.end(), [&](const ForwardArgument& a) { return a.name == d.name; })) {
        return absl::FailedPreconditionError(
            absl::StrCat(where, "config.pbtxt declares input '", d.name, "', which forward() does not take"));
      }
    }
  }
  return out;
}

}  // namespace infergate
