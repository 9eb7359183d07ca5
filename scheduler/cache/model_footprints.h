#pragma once
// What each model copy was measured to take on a device (parameters and
// buffers after a load, the activation peak of its warm-up), so the cache
// can make room before a load instead of after it. Kept in the state file,
// so a restart admits models by their learned sizes from the first load on.
// Keyed like the learned device limits: by model, model file (size and
// modification time) and LibTorch version, and by device kind and compute
// dtype, which decide the bytes.
//
// Before anything is learned, Expect estimates from the model file: a
// TorchScript archive stores its tensors uncompressed, nearly always in
// float32, so parameters take about the file's size times the compute
// dtype's width over four bytes; the activation peak is unknown (0) until a
// warm-up measures it.
//
// Threading: every method may be called from any thread; the state file is
// written outside the table's lock.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "common/mutex.h"
#include "devices/device_id.h"
#include "devices/dtype.h"
#include "scheduler/cache/state_file.h"
#include "scheduler/model/footprint.h"

namespace infergate {

class ModelFootprints {
 public:
  ModelFootprints(std::shared_ptr<StateFile> state_file, std::string libtorch_version);

  // Reads the footprints in the state file (call StateFile::Load first, or
  // let the other table do so). A malformed line is an error.
  absl::Status Load();

  // The learned footprint, or the estimate from `file_bytes` when none is.
  // `file` is the model file's FileStamp::ContentKey.
  Footprint Expect(const std::string& model, const std::string& file, uint64_t file_bytes, DeviceKind kind,
                   DType dtype) const;

  // The parameter bytes a load measured.
  void RecordParameters(const std::string& model, const std::string& file, DeviceKind kind, DType dtype,
                        uint64_t bytes);
  // An activation peak a run measured; the largest seen is kept.
  void RecordActivations(const std::string& model, const std::string& file, DeviceKind kind, DType dtype,
                         uint64_t bytes);

  // The footprint of a model file of `file_bytes` bytes in `dtype`, before
  // anything is learned of it.
  static Footprint Estimate(uint64_t file_bytes, DType dtype);

 private:
  struct Key {
    DeviceKind kind;
    DType dtype;
    std::string model;
    std::string file;
    friend auto operator<=>(const Key&, const Key&) = default;
  };
  struct Sizes {
    uint64_t parameter_bytes = 0;
    uint64_t activation_bytes = 0;
  };
  // Sets the parameter bytes (when non-zero) and raises the activation
  // peak for `key`; rewrites the state file's section if that changed it.
  void Update(const Key& key, uint64_t parameter_bytes, uint64_t activation_bytes);
  std::vector<std::string> Render() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<StateFile> state_file_;
  std::string libtorch_version_;
  mutable Mutex mu_;
  std::map<Key, Sizes> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infergate
