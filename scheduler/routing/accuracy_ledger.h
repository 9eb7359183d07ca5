#pragma once
// What accuracy checks measured, kept across restarts in the state file
// (section "accuracy"). A measurement belongs to the exact bytes of a model
// file (its SHA-256), the device kind and what decides its kernels (the
// CPU's instruction set where the device computes on the CPU, the compute
// capability of a CUDA device, the macOS of MPS), the dtype, the check
// inputs and the LibTorch version. A change to any of them finds nothing
// here and is checked again; a restart with the same key is not.
//
// Verdicts are not stored: each reader judges the measurement against the
// model's current tolerance (accuracy_tolerance.h), so a changed tolerance
// applies without a new check.
//
// Threading: every method may be called from any thread; the file is
// written outside the ledger's lock (see state_file.h).

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/mutex.h"
#include "devices/device_id.h"
#include "devices/dtype.h"
#include "scheduler/cache/state_file.h"
#include "scheduler/model/accuracy_tolerance.h"

namespace infergate {

struct AccuracyKey {
  std::string model;
  std::string file_digest;  // SHA-256 of the model file
  DeviceKind kind = DeviceKind::kCpu;
  std::string device_signature;  // what picks the device's kernels
  DType dtype = DType::kFloat16;
  std::string inputs;  // fingerprint of the check inputs' source
  friend auto operator<=>(const AccuracyKey&, const AccuracyKey&) = default;
};

class AccuracyLedger {
 public:
  AccuracyLedger(std::shared_ptr<StateFile> state_file, std::string libtorch_version);

  // Takes the state file's section as last read (the device limit table
  // reads the file at start-up, before this); lines from another LibTorch version,
  // or that do not parse, are dropped (and so checked again).
  absl::Status Load();

  std::optional<AccuracyMeasurement> Find(const AccuracyKey& key) const;
  // Stores `measurement` for `key` (replacing what was there) and rewrites
  // the state file.
  void Record(const AccuracyKey& key, const AccuracyMeasurement& measurement);

  // The state file's line for an entry, and back; exposed for tests.
  static std::string Render(const AccuracyKey& key, const std::string& libtorch,
                            const AccuracyMeasurement& measurement);
  struct Entry {
    AccuracyKey key;
    std::string libtorch;
    AccuracyMeasurement measurement;
  };
  static std::optional<Entry> Parse(const std::string& line);

 private:
  std::vector<std::string> RenderAll() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<StateFile> state_file_;
  const std::string libtorch_version_;
  mutable Mutex mu_;
  std::map<AccuracyKey, AccuracyMeasurement> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infergate
