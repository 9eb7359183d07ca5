#pragma once
// Enforces a simulated device's rules on every op the current thread runs
// while an instance is alive, by watching LibTorch's dispatcher through a
// thread-local RecordFunction callback: the ops checked are exactly the ops
// the request runs, not a static reading of the graph.

#include <cstdint>
#include <optional>
#include <string>

#include "devices/activation_meter.h"
#include "devices/simulation.h"

namespace infergate {

class SimulatedRun {
 public:
  explicit SimulatedRun(const SimulationRules& rules);
  ~SimulatedRun();
  SimulatedRun(const SimulatedRun&) = delete;
  SimulatedRun& operator=(const SimulatedRun&) = delete;

  // Throws what the real backend would have raised at the first violation:
  // c10::NotImplementedError for an unsupported MPS op, c10::TypeError for
  // a float64 tensor on MPS, c10::OutOfMemoryError past the memory size,
  // c10::Error "CUDA error: ..." once an injected device fault is due.
  // (Callbacks may not throw, so the run completes on the CPU first.)
  void Check() const;

  // Called from the dispatcher callbacks.
  void OnOp(const char* name, bool saw_float64);

 private:
  const SimulationRules& rules_;
  uint64_t handle_ = 0;
  SimulatedRun* previous_ = nullptr;
  std::string unsupported_op_;
  bool float64_ = false;
  ActivationMeter activations_;  // the out-of-memory check: resident + peak <= capacity
};

// The simulated device, if any, whose rules hold for the calling thread's
// device computation while an instance lives: SimulatedServable sets it
// around each run of a servable on a simulated device. Nests (the previous
// one holds again when it goes).
class SimulationRulesForThisThread {
 public:
  explicit SimulationRulesForThisThread(const SimulationRules* rules);
  ~SimulationRulesForThisThread();
  SimulationRulesForThisThread(const SimulationRulesForThisThread&) = delete;
  SimulationRulesForThisThread& operator=(const SimulationRulesForThisThread&) = delete;

 private:
  const SimulationRules* previous_;
};

// The part of a run that the device itself computes (a servable's forward
// pass; not its inputs' placement and casts, nor the conversion of its
// outputs for the answer, which a real backend does around it): a loader
// opens one around the forward pass. Watched by a SimulatedRun when the
// thread runs for a simulated device (SimulationRulesForThisThread), free
// otherwise.
class DeviceComputeScope {
 public:
  DeviceComputeScope();
  // As SimulatedRun::Check; nothing off a simulated device.
  void Check() const;

 private:
  std::optional<SimulatedRun> run_;
};

}  // namespace infergate
