#include "scheduler/loaders/torchscript/torchscript_optimization.h"

#include <torch/csrc/jit/api/module.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

// Exported by libtorch_cpu (TORCH_API) from torch/csrc/jit/codegen/fuser/
// interface.h, a header Debian's libtorch-dev does not ship; the prototype
// is that header's. (Python's torch._C._jit_override_can_fuse_on_cpu.)
namespace torch::jit {
TORCH_API void overrideCanFuseOnCPU(bool value);
}  // namespace torch::jit

namespace infergate {
namespace {

constexpr double kRelativeTolerance = 1e-4;

// Adds to `*max_error` and fails where `optimized` does not answer as `plain`
// did; `where` names the output ("output", "output[1]", "output['y']").
absl::Status Compare(const c10::IValue& plain, const c10::IValue& optimized, const std::string& where,
                     double* max_error) {
  auto differs = [&](const std::string& what) { return absl::FailedPreconditionError(absl::StrCat(where, " ", what)); };
  if (plain.isTensor()) {
    if (!optimized.isTensor()) return differs("is no longer a tensor");
    at::Tensor a = plain.toTensor();
    at::Tensor b = optimized.toTensor();
    if (b.is_mkldnn()) b = b.to_dense();
    if (a.scalar_type() != b.scalar_type()) return differs("changed dtype");
    if (a.sizes() != b.sizes()) return differs("changed shape");
    if (!a.is_floating_point()) {
      if (!a.equal(b)) return differs("changed value");
      return absl::OkStatus();
    }
    at::Tensor a64 = a.to(at::kDouble), b64 = b.to(at::kDouble);
    // NaN and inf where the plain module had them (infs of the same sign),
    // and nowhere else.
    const at::Tensor finite = at::isfinite(a64);
    const at::Tensor inf = at::isinf(a64);
    if (!finite.equal(at::isfinite(b64)) || !at::isnan(a64).equal(at::isnan(b64)) ||
        !a64.masked_select(inf).equal(b64.masked_select(inf))) {
      return differs("has NaN or inf where the module as saved had none, or lost them");
    }
    if (!finite.any().item<bool>()) return absl::OkStatus();
    const double scale = std::max(1.0, a64.masked_select(finite).abs().max().item<double>());
    const double error = (a64 - b64).masked_select(finite).abs().max().item<double>();
    *max_error = std::max(*max_error, error);
    if (!(error <= kRelativeTolerance * scale)) {
      return differs(absl::StrCat("moved by ", error, " (allowed ", kRelativeTolerance * scale, ")"));
    }
    return absl::OkStatus();
  }
  if (plain.isTuple() || plain.isList()) {
    if (plain.isTuple() != optimized.isTuple() || plain.isList() != optimized.isList()) {
      return differs("changed structure");
    }
    std::vector<c10::IValue> xs = plain.isTuple() ? plain.toTupleRef().elements().vec() : plain.toListRef().vec();
    std::vector<c10::IValue> ys =
        optimized.isTuple() ? optimized.toTupleRef().elements().vec() : optimized.toListRef().vec();
    if (xs.size() != ys.size()) return differs("changed length");
    for (size_t i = 0; i < xs.size(); ++i) {
      RETURN_IF_ERROR(Compare(xs[i], ys[i], absl::StrCat(where, "[", i, "]"), max_error));
    }
    return absl::OkStatus();
  }
  if (plain.isGenericDict()) {
    if (!optimized.isGenericDict()) return differs("changed structure");
    const c10::Dict<c10::IValue, c10::IValue> xs = plain.toGenericDict(), ys = optimized.toGenericDict();
    if (xs.size() != ys.size()) return differs("changed keys");
    for (const auto& item : xs) {
      if (!item.key().isString() || !ys.contains(item.key())) return differs("changed keys");
      const std::string at = absl::StrCat(where, "['", item.key().toStringRef(), "']");
      RETURN_IF_ERROR(Compare(item.value(), ys.at(item.key()), at, max_error));
    }
    return absl::OkStatus();
  }
  return differs(absl::StrCat("is a ", plain.tagKind(), ", which the check does not compare"));
}

}  // namespace

void PrepareTorchScriptRuntime() {
  static std::once_flag once;
  std::call_once(once, [] { torch::jit::overrideCanFuseOnCPU(false); });
}

absl::StatusOr<OptimizedModule> OptimizeForInference(const torch::jit::Module& module,
                                                     const std::vector<at::Tensor>& sample) {
  PrepareTorchScriptRuntime();
  try {
    c10::InferenceMode guard;
    // Frozen first, explicitly: optimize_for_inference freezes only a module
    // with a `training` attribute (every nn.Module saved from Python), and
    // takes any other (a module built in C++) for frozen already, leaving
    // its weights attributes its passes cannot fold. freeze works on a
    // clone: the module given (a handle here) stays as it is.
    torch::jit::Module plain = module;
    torch::jit::Module frozen = torch::jit::freeze(plain);
    torch::jit::Module optimized = torch::jit::optimize_for_inference(frozen);
    std::vector<c10::IValue> args(sample.begin(), sample.end());
    const c10::IValue expected = plain.forward(args);
    const c10::IValue got = optimized.forward(args);
    OptimizedModule out{optimized, 0};
    if (absl::Status s = Compare(expected, got, "output", &out.max_abs_error); !s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("optimized, its ", s.message()));
    }
    return out;
  } catch (const std::exception& e) {
    std::string what = e.what();
    return absl::FailedPreconditionError(
        absl::StrCat("optimizing it failed: ", what.substr(0, std::min<size_t>(what.find('\n'), 300))));
  }
}

}  // namespace infergate
