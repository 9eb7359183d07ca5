#include "devices/simulated_run.h"

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"
#include "common/units.h"

namespace infergate {
namespace {

thread_local SimulatedRun* t_current = nullptr;
thread_local const SimulationRules* t_rules = nullptr;

// A float64 tensor would live on the device, which MPS cannot hold, unless
// it is a wrapped number: LibTorch turns a Python int or float operand
// (`x * 0.5`, `x + 1`, `torch.where(c, x, 0.0)`) into a 0-dim double or long
// tensor flagged as a wrapped number, which the backend reads as a scalar
// and which never decides the result's dtype. Real MPS runs those.
bool LivesOnDeviceAsFloat64(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble && !t.unsafeGetTensorImpl()->is_wrapped_number();
}

void NoteFloat64(const c10::IValue& v, bool* float64) {
  if (v.isTensor() && v.toTensor().defined() && LivesOnDeviceAsFloat64(v.toTensor())) *float64 = true;
}

std::unique_ptr<at::ObserverContext> OnSimulatedOpStart(const at::RecordFunction& fn) {
  if (!t_current) return nullptr;
  bool f64 = false;
  for (const c10::IValue& v : fn.inputs()) NoteFloat64(v, &f64);
  t_current->OnOp(fn.name(), f64);
  return nullptr;
}

void OnSimulatedOpEnd(const at::RecordFunction& fn, at::ObserverContext*) {
  if (!t_current) return;
  bool f64 = false;
  for (const c10::IValue& v : fn.outputs()) NoteFloat64(v, &f64);
  t_current->OnOp(fn.name(), f64);
}

}  // namespace

SimulatedRun::SimulatedRun(const SimulationRules& rules) : rules_(rules), previous_(t_current) {
  t_current = this;
  handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&OnSimulatedOpStart, &OnSimulatedOpEnd)
                                           .needsInputs(true)
                                           .needsOutputs(true)
                                           .scopes({at::RecordScope::FUNCTION}));
}

SimulatedRun::~SimulatedRun() {
  at::removeCallback(handle_);
  t_current = previous_;
}

void SimulatedRun::OnOp(const char* name, bool saw_float64) {
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
    uint64_t peak_bytes = activations_.peak_bytes();
    uint64_t used = rules_.memory->used();
    uint64_t capacity = rules_.memory->capacity();
    TORCH_CHECK_WITH(OutOfMemoryError, used + peak_bytes <= capacity,
                     rules_.device.kind == DeviceKind::kCuda ? "CUDA" : "MPS", " out of memory. Tried to allocate ",
                     FormatBytes(peak_bytes), " (GPU ", rules_.device.index, "; ", FormatBytes(capacity),
                     " total capacity; ", FormatBytes(used), " already allocated; ",
                     FormatBytes(capacity > used ? capacity - used : 0), " free; simulated device)");
  }
}

SimulationRulesForThisThread::SimulationRulesForThisThread(const SimulationRules* rules) : previous_(t_rules) {
  t_rules = rules;
}

SimulationRulesForThisThread::~SimulationRulesForThisThread() { t_rules = previous_; }

DeviceComputeScope::DeviceComputeScope() {
  if (t_rules) run_.emplace(*t_rules);
}

void DeviceComputeScope::Check() const {
  if (run_) run_->Check();
}

}  // namespace infergate
