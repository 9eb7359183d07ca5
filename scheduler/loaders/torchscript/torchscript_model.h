#pragma once
// One TorchScript model loaded on one device in one compute dtype: the
// servable the server runs in production.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "devices/device_info.h"
#include "devices/dtype.h"
#include "infergate/v1/model_config.pb.h"
#include "scheduler/model/host_copy_store.h"
#include "scheduler/model/servable.h"
#include "scheduler/model/tensor_types.h"
#include "scheduler/repository/input_signature.h"

namespace infergate {

class TorchScriptModel final : public Servable {
 public:
  // torch::jit::load on the CPU, checks forward()'s signature against the
  // config, casts floating parameters to `compute_dtype` and moves it to
  // `device`. Errors: INTERNAL for an unreadable file or a bad signature;
  // RESOURCE_EXHAUSTED (with an OOM device failure) when it does not fit.
  // `admit`, when set, is asked for room for the parameter bytes before any
  // is placed on the device; its error is returned as is. With `host`, the
  // module is copied from the file's host copy when there is one (no file
  // read, no deserialisation; on a real CUDA device straight from pinned
  // memory), and one is kept when asked (host_copy_store.h).
  static absl::StatusOr<std::shared_ptr<TorchScriptModel>> Load(const std::string& path, const v1::ModelConfig& config,
                                                                const DeviceInfo& device, DType compute_dtype,
                                                                const AdmitBytes& admit = nullptr,
                                                                const HostCopyUse& host = {});
  ~TorchScriptModel() override;

  // Runs forward() on inputs already ordered as signature(). Floating
  // inputs are cast to the compute dtype, integer ones are left alone.
  // Outputs come back on the CPU, contiguous, in the declared output dtype
  // (float32 for undeclared floating outputs). A throwing model gives
  // INTERNAL with the model's message; device failures (unsupported op,
  // dtype, out of memory) carry a DeviceFailure payload.
  absl::StatusOr<std::vector<NamedTensor>> Run(const std::vector<at::Tensor>& inputs) const override;

  const InputSignature& signature() const override { return signature_; }
  DType compute_dtype() const override { return compute_dtype_; }
  // Parameter and buffer bytes on the device.
  uint64_t resident_bytes() const override { return parameter_bytes_; }
  std::chrono::microseconds transfer_time() const override;
  // Whether this copy serves the module optimized for inference
  // (torchscript_optimization.h) rather than as saved.
  bool optimized() const;
  // Whether this copy was made from a host copy rather than the file.
  bool from_host_copy() const;

 private:
  struct Impl;
  TorchScriptModel(std::unique_ptr<Impl> impl, InputSignature signature, DType dtype, uint64_t bytes);

  std::unique_ptr<Impl> impl_;
  InputSignature signature_;
  DType compute_dtype_;
  uint64_t parameter_bytes_;
};

}  // namespace infergate
