#include "devices/simulated_run.h"

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace infergate {
namespace {

thread_local SimulatedRun* t_current = nullptr;

uint64_t TensorBytes(const c10::IValue& v, bool* float64) {
  if (!v.isTensor()) return 0;
  const at::Tensor& t = v.toTensor();
  if (!t.defined()) return 0;
  if (t.scalar_type() == at::kDouble) *float64 = true;
  return static_cast<uint64_t>(t.numel()) * t.element_size();
}

// Inputs are checked for float64 only: their bytes are parameters (already
// counted in the device's ledger) or earlier outputs.
std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
  if (!t_current) return nullptr;
  bool f64 = false;
  for (const c10::IValue& v : fn.inputs()) TensorBytes(v, &f64);
  t_current->OnOp(fn.name(), 0, f64);
  return nullptr;
}

// What an op returns is newly live memory on the device, unless it is a
// view of an input (aten::t, reshape, ...), which allocates nothing.
void OnEnd(const at::RecordFunction& fn, at::ObserverContext*) {
  if (!t_current) return;
  bool f64 = false;
  uint64_t bytes = 0;
  for (const c10::IValue& v : fn.outputs()) {
    bool view = false;
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().has_storage()) {
      const void* data = v.toTensor().storage().data();
      for (const c10::IValue& in : fn.inputs()) {
        view = view || (in.isTensor() && in.toTensor().defined() && in.toTensor().has_storage() &&
                        in.toTensor().storage().data() == data);
      }
    }
    uint64_t b = TensorBytes(v, &f64);
    if (!view) bytes += b;
  }
  t_current->OnOp(fn.name(), bytes, f64);
}

std::string GiB(uint64_t b) {
  if (b < (uint64_t{1} << 30)) return absl::StrFormat("%.2f MiB", static_cast<double>(b) / (1u << 20));
  return absl::StrFormat("%.2f GiB", static_cast<double>(b) / (1u << 30));
}

}  // namespace

SimulatedRun::SimulatedRun(const SimulationRules& rules) : rules_(rules), previous_(t_current) {
  t_current = this;
  handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&OnStart, &OnEnd)
                                           .needsInputs(true)
                                           .needsOutputs(true)
                                           .scopes({at::RecordScope::FUNCTION}));
}

SimulatedRun::~SimulatedRun() {
  at::removeCallback(handle_);
  t_current = previous_;
}

void SimulatedRun::OnOp(const char* name, uint64_t output_bytes, bool saw_float64) {
  uint64_t working_bytes = output_bytes;
  if (working_bytes > peak_bytes_) peak_bytes_ = working_bytes;
  if (saw_float64 && rules_.reject_float64) float64_ = true;
  if (unsupported_op_.empty() && !rules_.unsupported_ops.empty() && rules_.unsupported_ops.count(name)) {
    unsupported_op_ = name;
  }
}

void SimulatedRun::Check() const {
  int64_t run = rules_.runs->fetch_add(1) + 1;
  TORCH_CHECK(rules_.fail_after_runs < 0 || run <= rules_.fail_after_runs,
              rules_.device.kind == DeviceKind::kCuda ? "CUDA error" : "MPS error",
              ": unspecified launch failure (simulated device fault after ", rules_.fail_after_runs, " runs)");
  TORCH_CHECK_NOT_IMPLEMENTED(
      unsupported_op_.empty(), "The operator '", unsupported_op_,
      "' is not currently implemented for the MPS device. If you want this op to be added in priority during the "
      "prototype phase of this feature, please comment on the PyTorch MPS op coverage tracking issue. As a "
      "temporary fix, you can set the environment variable `PYTORCH_ENABLE_MPS_FALLBACK=1` to use the CPU as a "
      "fallback for this op. WARNING: this will be slower than running natively on MPS.");
  TORCH_CHECK_TYPE(!float64_,
                   "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
                   "Please use float32 instead.");
  if (rules_.memory) {
    uint64_t used = rules_.memory->used();
    uint64_t capacity = rules_.memory->capacity();
    TORCH_CHECK_WITH(OutOfMemoryError, used + peak_bytes_ <= capacity,
                     rules_.device.kind == DeviceKind::kCuda ? "CUDA" : "MPS", " out of memory. Tried to allocate ",
                     GiB(peak_bytes_), " (GPU ", rules_.device.index, "; ", GiB(capacity), " total capacity; ",
                     GiB(used), " already allocated; ", GiB(capacity > used ? capacity - used : 0),
                     " free; simulated device)");
  }
}

}  // namespace infergate
