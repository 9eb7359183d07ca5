#pragma once
// What a simulated accelerator (--simulate-devices, simulation.h) charges a
// model loaded on it, for any servable, once: the loaders place weights and
// run forward passes on the CPU as they would anywhere, and this wrapper
// adds what the real device would cost and refuse.
//
//   1. Memory: the model's resident bytes are reserved in the device's
//      ledger when it is wrapped (the model does not fit: RESOURCE_EXHAUSTED
//      with an out-of-memory DeviceFailure, in the text a real CUDA or MPS
//      device gives) and given back when the wrapper goes.
//   2. The move: the weights' host-to-device transfer is charged on the
//      device's link (SimulatedMove: queued behind other moves, slept), and
//      transfer_time() is the loader's own placing time plus that charge.
//   3. Each run (Run and WarmUp) holds the device's rules for its thread
//      (SimulationRulesForThisThread), and the loader's DeviceComputeScope
//      around the forward pass watches it: an op the backend lacks, float64
//      on MPS, activations past the memory, or an injected device fault
//      fail the run as the real backend would, with its DeviceFailure. The
//      inputs' placement and the outputs' conversion, which a real backend
//      does around the forward pass, are not watched.
//   4. With the device's compute_scale, each run that succeeds is held
//      until that many times the least CPU time a run of this model file
//      (in this dtype, on this device: any of its copies there, LeastRunTimes)
//      with as many rows has taken the calling thread (the CPU time, not the wall
//      time: another thread's turn on a shared core is not this device's
//      work; the least, since contention for the host's memory and caches
//      lengthens CPU time too; the wall time when LibTorch runs more than
//      one intra-op thread, whose work the caller's clock does not see): the
//      device's time for a model is then its own, as a real device's is.
//      Never shorter than the run took.
//
// Servables on the CPU, or on a device that is not simulated, are returned
// unwrapped. Immutable after Wrap; (4)'s least run times are the device's
// (their own lock, taken for a lookup, never across a run);
// thread-safe as the inner servable is (each run's watch is its own
// thread's).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devices/device_info.h"
#include "devices/simulation.h"
#include "scheduler/model/servable.h"

namespace infergate {

class SimulatedServable final : public Servable {
 public:
  // `inner` (loaded for `device` as model `model`, from `file`) with the
  // charges of `device`'s simulation, or `inner` itself when `device` is
  // the CPU or not simulated. Sleeps for the move. Errors as in (1) above.
  // (4)'s least run times are kept by `file` (by `model` when empty) and
  // compute dtype: each version's file is a model of its own.
  static absl::StatusOr<std::shared_ptr<Servable>> Wrap(std::shared_ptr<Servable> inner, const DeviceInfo& device,
                                                        const std::string& model, const std::string& file = "");
  ~SimulatedServable() override;

  absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<at::Tensor>& inputs) const override;
  absl::StatusOr<std::vector<NamedTensor>> WarmUp(const std::vector<at::Tensor>& inputs) const override;
  const InputSignature& signature() const override { return inner_->signature(); }
  DType compute_dtype() const override { return inner_->compute_dtype(); }
  uint64_t resident_bytes() const override { return inner_->resident_bytes(); }
  std::chrono::microseconds transfer_time() const override { return transfer_time_; }

 private:
  SimulatedServable(std::shared_ptr<Servable> inner, std::shared_ptr<const SimulationRules> rules,
                    uint64_t reserved_bytes, std::chrono::microseconds transfer_time, std::string work_key);
  // `run` (the inner Run or WarmUp of `inputs`) under the device's rules,
  // held to its compute time (4).
  template <typename RunInner>
  absl::StatusOr<std::vector<NamedTensor>> Watched(const std::vector<at::Tensor>& inputs, RunInner run) const;
  // (4): the device's time for a run of `rows` rows that took `work_us` of
  // the host's time, which lowers the least time seen for those rows.
  std::chrono::microseconds ComputeTime(int64_t rows, uint64_t work_us) const;

  std::shared_ptr<Servable> inner_;
  std::shared_ptr<const SimulationRules> rules_;
  uint64_t reserved_bytes_;
  std::chrono::microseconds transfer_time_;
  std::string work_key_;  // the model file and its compute dtype: its runs' key in the least run times
};

}  // namespace infergate
