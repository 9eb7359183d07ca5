#pragma once
// A model compiled ahead of time by AOTInductor (a .pt2 package), loaded on
// one device: the variant of the package built for that device
// (aoti_package.h has the rule) behind the Servable interface, so routing,
// batching, the cache and the failure policy treat it as any model.
//
// What differs from TorchScript:
//   - a device the package has no variant for fails the load with a
//     kNoCompiledVariant device failure, so the request falls back
//     ("no_compiled_variant:<kind>") and the device is remembered;
//   - precision is fixed at export: a compute dtype other than float32 is
//     refused;
//   - the config must declare the inputs, with every dim but the batch one
//     fixed (a compiled kernel trusts its shapes); their count is checked
//     against the package's call spec at load.
//
// Loading unpacks the variant into a folder of its own
// (aoti_unpacked_variant.h), removed when the model is unloaded or evicted
// (this object is destroyed), and so at exit; a refused load leaves none.
//
// Instances: the library is opened once, as one AOTInductor container
// holding `instances` model instances (the device's workers that may run
// this model at once). An instance runs one call at a time; the instances
// share one copy of the constants, which on the CPU are read in place from
// the library. So the memory admitted and reported is the library's size,
// whatever the instances.
//
// On a real GPU the container is opened on that device (cuda:N, its
// constants copied there), inputs are moved there, and each run goes on
// that device's current stream, which is the worker's own
// (devices/worker_stream.h); answers come back to the CPU as from any
// model. (Not yet run on a GPU: no GPU was lent when this was written.)
//
// Thread-safety: Run may be called from several workers at once; the
// container gives each run an instance of its own. At most `instances`
// runs enter it at once: LibTorch 2.6's container deadlocks when more runs
// than instances meet on its first run (the first folds constants under
// the exclusive side of a shared mutex; one with no free instance waits for
// one holding the shared side; every worker that ran the model then waited
// forever).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "scheduler/model/servable.h"

namespace infergate {

class AotiModel final : public Servable {
 public:
  static absl::StatusOr<std::shared_ptr<AotiModel>> Load(const std::string& path, const v1::ModelConfig& config,
                                                         const DeviceInfo& device, DType compute_dtype,
                                                         const AdmitBytes& admit = nullptr, int instances = 1);
  ~AotiModel() override;

  absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<at::Tensor>& inputs) const override;
  // Runs each instance once.
  absl::StatusOr<std::vector<NamedTensor>> WarmUp(const std::vector<at::Tensor>& inputs) const override;
  const InputSignature& signature() const override { return signature_; }
  DType compute_dtype() const override { return DType::kFloat32; }
  uint64_t resident_bytes() const override { return bytes_; }
  std::chrono::microseconds transfer_time() const override;
  // How many runs can go at once (the container's model instances).
  size_t instances() const;

 private:
  struct Impl;
  AotiModel(std::unique_ptr<Impl> impl, InputSignature signature, uint64_t bytes);

  std::unique_ptr<Impl> impl_;
  InputSignature signature_;
  uint64_t bytes_;
};

// Whether `path` names an AOTInductor package (by its extension, .pt2).
bool IsAotiPackagePath(const std::string& path);

}  // namespace infergate
