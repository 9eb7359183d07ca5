#include "scheduler/model/forward_arguments.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace infergate {
namespace {

// N for a name "<anything>__<N>"; nullopt otherwise.
std::optional<size_t> PositionalIndex(const std::string& name) {
  const size_t at = name.rfind("__");
  if (at == std::string::npos || at == 0 || at + 2 >= name.size() || name.size() - at - 2 > 4) return std::nullopt;
  size_t n = 0;
  for (size_t i = at + 2; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    n = n * 10 + static_cast<size_t>(name[i] - '0');
  }
  return n;
}

std::string ArgumentNames(const std::vector<ForwardArgument>& arguments) {
  std::vector<std::string> names;
  for (const ForwardArgument& a : arguments) names.push_back(a.name);
  return names.empty() ? "no arguments" : absl::StrJoin(names, ", ");
}

// Whether every declared input names a forward() argument, or follows
// "<name>__<N>" for one.
bool FollowsANamingConvention(const std::vector<ForwardArgument>& arguments, const InputSignature& declared) {
  for (const InputSpec& d : declared.inputs) {
    const bool named =
        std::any_of(arguments.begin(), arguments.end(), [&](const ForwardArgument& a) { return a.name == d.name; });
    const std::optional<size_t> n = PositionalIndex(d.name);
    // A "<name>__<N>" name follows Triton's convention even when N is past
    // forward()'s arguments: that is an error to name, not a third convention.
    if (!named && !n) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<ForwardInputs> MatchForwardArguments(const std::string& model,
                                                    const std::vector<ForwardArgument>& arguments,
                                                    const InputSignature* declared, uint32_t max_batch_size) {
  const std::string where = absl::StrCat("model '", model, "': ");
  ForwardInputs out;
  out.signature.max_batch_size = max_batch_size;
  bool skipped = false;
  // Which declared input fills each forward() argument: the one of its
  // name, else Triton's PyTorch-backend convention, "<name>__<N>" for
  // forward()'s argument N (counted from 0, after self).
  std::map<std::string, const InputSpec*> by_argument;
  if (declared && !FollowsANamingConvention(arguments, *declared)) {
    // Triton's third convention (its PyTorch backend's strict config
    // ordering): names that are neither forward()'s nor "<name>__<N>" (an
    // exported "input:0") fill forward()'s input arguments in the
    // config's order, when there are as many.
    std::vector<const ForwardArgument*> takers;
    for (const ForwardArgument& a : arguments) {
      if ((a.tensor || a.strings) && !a.has_default) takers.push_back(&a);
    }
    if (takers.size() == declared->inputs.size()) {
      for (size_t k = 0; k < takers.size(); ++k) by_argument.emplace(takers[k]->name, &declared->inputs[k]);
    }
  }
  if (declared && by_argument.empty()) {
    for (const InputSpec& d : declared->inputs) {
      std::string argument;
      if (std::any_of(arguments.begin(), arguments.end(), [&](const ForwardArgument& a) { return a.name == d.name; })) {
        argument = d.name;
      } else if (std::optional<size_t> n = PositionalIndex(d.name); n && *n < arguments.size()) {
        argument = arguments[*n].name;
      } else {
        return absl::FailedPreconditionError(
            absl::StrCat(where, "config.pbtxt declares input '", d.name, "', which forward() does not take (it takes ",
                         ArgumentNames(arguments), "; Triton's '<name>__<N>' names argument N)"));
      }
      if (!by_argument.emplace(argument, &d).second) {
        return absl::FailedPreconditionError(absl::StrCat(where, "config.pbtxt inputs '", by_argument[argument]->name,
                                                          "' and '", d.name, "' both name forward() argument '",
                                                          argument, "'"));
      }
    }
  }
  auto declared_spec = [&](const std::string& name) -> const InputSpec* {
    auto it = by_argument.find(name);
    return it == by_argument.end() ? nullptr : it->second;
  };
  for (const ForwardArgument& a : arguments) {
    const bool required_tensor = (a.tensor || a.strings) && !a.has_default;
    const bool optional_input = (a.tensor && a.has_default) || a.optional_tensor;
    const InputSpec* spec = declared_spec(a.name);
    if (required_tensor || (optional_input && spec)) {
      if (declared && !spec) {
        return absl::FailedPreconditionError(
            absl::StrCat(where, "forward() argument '", a.name, "' is not declared in config.pbtxt inputs"));
      }
      const bool declared_strings = spec && spec->dtype == DType::kBytes;
      if (spec && spec->dtype && declared_strings != a.strings) {
        return absl::FailedPreconditionError(absl::StrCat(
            where, "config.pbtxt declares input '", spec->name, "' as ",
            declared_strings ? "TYPE_STRING" : DTypeName(*spec->dtype), " but forward() argument '", a.name, "' is ",
            a.type, a.strings ? "; a List[str] argument takes TYPE_STRING" : "; TYPE_STRING takes List[str]"));
      }
      out.signature.inputs.push_back(
          spec ? *spec
               : InputSpec{a.name, a.strings ? std::optional<DType>(DType::kBytes) : std::nullopt, std::nullopt});
      out.argument_names.push_back(a.name);
      out.by_keyword |= skipped;
      continue;
    }
    if (spec) {
      return absl::FailedPreconditionError(absl::StrCat(where, "config.pbtxt input '", a.name,
                                                        "' is forward() argument of type ", a.type,
                                                        "; only Tensor, Optional[Tensor] and List[str] arguments are "
                                                        "inputs"));
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
          " without a default; only Tensor, Optional[Tensor] and List[str] arguments can come from a request"));
    }
    skipped = true;  // left at its default
  }
  return out;
}

}  // namespace infergate
