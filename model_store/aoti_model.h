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
// AOTInductor unpacks the package into a fresh /tmp/XXXXXX folder when it
// loads a variant (LibTorch 2.6 ignores TMPDIR), and removes it when the
// loader goes: when the model is unloaded or evicted (this object is
// destroyed), and so at exit. A load that fails after unpacking (a junk
// library) removes its folder itself; loaders are made one at a time for it.
//
// Instances: LibTorch 2.6's loader makes a container with one model
// instance, which runs one call at a time. So a package is loaded once per
// worker that may run it at once (`instances`: the device's workers for
// this model), each loader with its own unpacked folder, container and copy
// of the constants; a run borrows a free one (instance_pool.h). The memory
// admitted and reported is the library's size times the instances.
//
// Thread-safety: Run may be called from several workers at once; each run
// has an instance to itself. That also keeps clear of LibTorch 2.6's
// deadlock when two threads make a container's first run together (the
// first folds constants under the exclusive side of a shared mutex while
// holding the only model instance; the second waits for that instance
// holding the shared side; every worker that ran the model then waited
// forever).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model_store/servable.h"

namespace torch::inductor {
class AOTIModelPackageLoader;
}

namespace infergate {

class AotiModel final : public Servable {
 public:
  static absl::StatusOr<std::shared_ptr<AotiModel>> Load(const std::string& path, const v1::ModelConfig& config,
                                                         const DeviceInfo& device, DType compute_dtype,
                                                         const AdmitBytes& admit = nullptr, int instances = 1);
  ~AotiModel() override;

  absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<at::Tensor>& inputs) const override;
  absl::StatusOr<std::vector<NamedTensor>> WarmUp(const std::vector<at::Tensor>& inputs) const override;
  const InputSignature& signature() const override { return signature_; }
  DType compute_dtype() const override { return DType::kFloat32; }
  uint64_t resident_bytes() const override { return bytes_; }
  // How many runs can go at once (loaders made at load).
  size_t instances() const;

 private:
  struct Impl;
  AotiModel(std::unique_ptr<Impl> impl, InputSignature signature, uint64_t bytes);
  // Run on `instance`, or on a borrowed one when null.
  absl::StatusOr<std::vector<NamedTensor>> RunOn(torch::inductor::AOTIModelPackageLoader* instance,
                                                 const std::vector<at::Tensor>& inputs) const;

  std::unique_ptr<Impl> impl_;
  InputSignature signature_;
  uint64_t bytes_;
};

// Whether `path` names an AOTInductor package (by its extension, .pt2).
bool IsAotiPackagePath(const std::string& path);

}  // namespace infergate
