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
// Thread-safety: Run may be called from several workers at once;
// AOTInductor's container serialises the runs of its one model instance.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model_store/servable.h"

namespace infergate {

class AotiModel final : public Servable {
 public:
  static absl::StatusOr<std::shared_ptr<AotiModel>> Load(const std::string& path, const v1::ModelConfig& config,
                                                         const DeviceInfo& device, DType compute_dtype,
                                                         const AdmitBytes& admit = nullptr);
  ~AotiModel() override;

  absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<at::Tensor>& inputs) const override;
  const InputSignature& signature() const override { return signature_; }
  DType compute_dtype() const override { return DType::kFloat32; }
  uint64_t resident_bytes() const override { return bytes_; }

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
