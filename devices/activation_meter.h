#pragma once
// Measures the peak of tensor memory a model run allocates on top of what
// already existed (parameters, inputs): the activation peak that decides
// whether a model fits beside others on an accelerator.
//
// It watches LibTorch's dispatcher on the current thread (a thread-local
// RecordFunction callback) while an instance lives: every storage an op
// returns is counted as live until the last tensor on it is freed (it is
// held by a weak reference only, so the meter changes no lifetimes), and
// an op's inputs count as live until its outputs exist, also one the op
// itself frees (TorchScript hands an op the last reference to a value it
// no longer needs). Views share their input's storage and are not counted
// twice. The same measure works for every device kind, simulated or real,
// since it counts tensor bytes rather than asking a device allocator.
//
// Threading: one instance per thread, created and destroyed on the thread
// that runs the model; instances nest.

#include <c10/core/Storage.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <vector>

namespace infergate {

class ActivationMeter {
 public:
  ActivationMeter();
  ~ActivationMeter();
  ActivationMeter(const ActivationMeter&) = delete;
  ActivationMeter& operator=(const ActivationMeter&) = delete;

  // Highest sum of live op outputs seen so far, in bytes.
  uint64_t peak_bytes() const { return peak_bytes_; }

  // Called from the dispatcher callbacks: as an op starts (storages freed
  // before it are no longer live), then with each of its output storages.
  void OnOpStart();
  void OnOutput(const c10::Storage& storage);
  // The meter this one is nested in on the same thread, if any.
  ActivationMeter* previous() const { return previous_; }

 private:
  struct Live {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    const c10::StorageImpl* identity;
    uint64_t bytes;
  };
  void DropFreed();

  uint64_t handle_ = 0;
  ActivationMeter* previous_ = nullptr;
  std::vector<Live> live_;
  uint64_t live_bytes_ = 0;
  uint64_t peak_bytes_ = 0;
};

}  // namespace infergate
