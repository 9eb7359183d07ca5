#include "devices/activation_meter.h"

#include <ATen/record_function.h>

#include <algorithm>

namespace infergate {
namespace {

thread_local ActivationMeter* t_meter = nullptr;

// The storages an op was given, read in the start callback: a
// RecordFunction's inputs() are valid only there: by the end callback the
// boxed copies of the arguments may already be destroyed. Weak references
// keep each storage's identity from being reused by an op's output while it
// runs, and change no lifetime.
struct InputStorages : at::ObserverContext {
  std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> storages;

  bool Holds(const c10::StorageImpl* storage) const {
    return std::any_of(storages.begin(), storages.end(),
                       [&](const auto& s) { return s._unsafe_get_target() == storage; });
  }
};

std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
  if (!t_meter) return nullptr;
  for (ActivationMeter* m = t_meter; m; m = m->previous()) m->OnOpStart();
  auto inputs = std::make_unique<InputStorages>();
  for (const c10::IValue& in : fn.inputs()) {
    if (!in.isTensor()) continue;
    const at::Tensor& t = in.toTensor();
    if (t.defined() && t.has_storage()) inputs->storages.push_back(t.storage().getWeakStorageImpl());
  }
  return inputs;
}

void OnEnd(const at::RecordFunction& fn, at::ObserverContext* context) {
  if (!t_meter) return;
  const auto* inputs = static_cast<const InputStorages*>(context);
  for (const c10::IValue& v : fn.outputs()) {
    if (!v.isTensor()) continue;
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || !t.has_storage()) continue;
    // A view of an input, an in-place op or an op returning its input
    // allocates nothing.
    if (inputs && inputs->Holds(t.storage().unsafeGetStorageImpl())) continue;
    for (ActivationMeter* m = t_meter; m; m = m->previous()) m->OnOutput(t.storage());
  }
}

}  // namespace

// The outermost meter of a thread registers the one callback; it feeds
// every meter alive on the thread, innermost first.
ActivationMeter::ActivationMeter() : previous_(t_meter) {
  t_meter = this;
  if (!previous_) {
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&OnStart, &OnEnd)
                                             .needsInputs(true)
                                             .needsOutputs(true)
                                             .scopes({at::RecordScope::FUNCTION}));
  }
}

ActivationMeter::~ActivationMeter() {
  if (!previous_) at::removeCallback(handle_);
  t_meter = previous_;
}

void ActivationMeter::DropFreed() {
  auto freed = std::remove_if(live_.begin(), live_.end(), [&](const Live& l) {
    if (!l.storage.expired()) return false;
    live_bytes_ -= l.bytes;
    return true;
  });
  live_.erase(freed, live_.end());
}

void ActivationMeter::OnOpStart() { DropFreed(); }

void ActivationMeter::OnOutput(const c10::Storage& storage) {
  const c10::StorageImpl* identity = storage.unsafeGetStorageImpl();
  // Already counted (an op that hands back a storage made earlier in the run).
  for (const Live& l : live_) {
    if (l.identity == identity) return;
  }
  if (storage.data() == nullptr && storage.nbytes() == 0) return;
  live_.push_back({storage.getWeakStorageImpl(), identity, static_cast<uint64_t>(storage.nbytes())});
  live_bytes_ += storage.nbytes();
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
}

}  // namespace infergate
