#pragma once
// Simulated CUDA and MPS devices: they compute on the CPU but enforce the
// target backend's rules, so CUDA/MPS code paths run on machines without
// either. Only present when asked for with --simulate-devices.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "devices/device_id.h"
#include "devices/least_run_times.h"
#include "devices/simulated_link.h"

namespace infergate {

// Bytes in use on a simulated device, against its capacity.
class MemoryLedger {
 public:
  explicit MemoryLedger(uint64_t capacity) : capacity_(capacity) {}
  // False (and nothing reserved) when `bytes` would not fit.
  bool TryReserve(uint64_t bytes);
  void Release(uint64_t bytes);
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  // The highest `used` has ever been.
  uint64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  uint64_t capacity() const { return capacity_; }

 private:
  const uint64_t capacity_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> peak_{0};
};

// What a simulated device enforces while a model runs on it.
struct SimulationRules {
  DeviceId device;
  bool reject_float64 = false;            // MPS
  std::set<std::string> unsupported_ops;  // MPS; "aten::op" without overload
  std::shared_ptr<MemoryLedger> memory;   // capacity counted from parameters and live tensors
  // Fault injection: after this many runs every run fails like a lost GPU
  // ("CUDA error: ..."); -1 never.
  int64_t fail_after_runs = -1;
  std::shared_ptr<std::atomic<int64_t>> runs = std::make_shared<std::atomic<int64_t>>(0);
  // What moving a model's weights onto the device costs, as a real one
  // charges it: a fixed cost per load plus the bytes over the bandwidth.
  double transfer_bytes_per_second = 0;  // 0: free
  std::chrono::microseconds transfer_latency{0};
  // The device's one link at those rates, shared by every move onto it
  // (simulated_link.h); null: each move is charged alone.
  std::shared_ptr<SimulatedLink> link;
  // How long the device takes to compute a forward pass: this many times
  // the least CPU time such a pass of the model has taken the host thread
  // that ran it (0: the pass takes the wall time it takes). A real
  // accelerator's time for a model is its own, whatever the host's other
  // threads do; a simulated one that computes on the host's shared cores
  // and memory is not, unless charged this way (SimulatedServable holds
  // the run until then, never less than it took). The least times are the
  // device's, shared by every copy of a model loaded onto it.
  double compute_scale = 0;
  std::shared_ptr<LeastRunTimes> least_run_times = std::make_shared<LeastRunTimes>();
};

// The simulated time to move `bytes` of weights onto the device `rules`
// describe, with nothing else on its link.
std::chrono::microseconds SimulatedTransferTime(const SimulationRules& rules, uint64_t bytes);

// Moves `bytes` onto the device as the simulation charges it: booked on its
// shared link behind the moves already there, or alone where it has none.
// Sleeps that long; returns the time it took (queue and transfer).
std::chrono::microseconds SimulatedMove(const SimulationRules& rules, uint64_t bytes);

// How long a move onto the device would wait for its link now (0 without
// one).
std::chrono::microseconds SimulatedLinkQueue(const SimulationRules& rules);

// What a CPU `factor` times slower (--simulate-cpu-slowdown) adds to a run
// that took `wall_us`: the run is held to `factor` times `least_work_us`,
// the least work a run of that model with as many rows has taken there
// (LeastRunTimes; the work being the running thread's CPU time when the
// run was the thread's alone, one intra-op thread, else the wall time), so
// the extra is that less what it took already, at least 0. A real slower
// CPU's time for a run is the model's own; charged from the run's own work
// instead, a CPU run on this project's 2-core host took twice as long
// whenever a simulated accelerator computed beside it (the two share the
// host's memory bandwidth), which a real accelerator does not do to its
// host. 0 for a factor of 1 or less.
double SimulatedCpuExtraUs(double wall_us, double least_work_us, double factor);

// Host-to-device transfer of a simulated device unless its entry says
// otherwise: a PCIe 4.0 x16 GPU's effective rate from pageable host memory
// and its per-load cost (allocation, stream set-up) for CUDA; a copy within
// Apple silicon's unified memory for MPS.
inline constexpr double kSimulatedCudaBytesPerSecond = 12e9;
inline constexpr std::chrono::microseconds kSimulatedCudaTransferLatency{2000};
inline constexpr double kSimulatedMpsBytesPerSecond = 60e9;
inline constexpr std::chrono::microseconds kSimulatedMpsTransferLatency{500};

// One device of --simulate-devices: "cuda:0", "cuda:1=2GiB@7.5", "mps@13",
// optionally followed by entries that set its transfer cost and its
// compute time: "cuda:0=8GiB@8.0,bandwidth=12GB/s,transfer_latency=2ms,compute_scale=2".
struct SimulatedDeviceSpec {
  DeviceId id;
  uint64_t memory_bytes = uint64_t{16} << 30;
  int compute_capability = 80;                     // CUDA, major*10+minor
  int macos_major = 14;                            // MPS
  double transfer_bytes_per_second = 0;            // the kind's default (above) when not given
  std::chrono::microseconds transfer_latency{-1};  // the kind's default when negative
  double compute_scale = 0;                        // SimulationRules::compute_scale; 0: wall time
};

// Parses the comma-separated --simulate-devices list: devices, each
// followed by its own `bandwidth=` (bytes per second: "12GB/s"),
// `transfer_latency=` ("2ms") and `compute_scale=` (a positive number, at
// most 1000) entries. Errors name the flag and the entry.
absl::StatusOr<std::vector<SimulatedDeviceSpec>> ParseSimulatedDevices(absl::string_view text);

// Ops real MPS has lacked in some releases; the default deny list.
std::vector<std::string> DefaultMpsUnsupportedOps();

// Normalises "aten::upsample_bicubic2d.out" to "aten::upsample_bicubic2d".
std::string OpBaseName(absl::string_view op);

}  // namespace infergate
