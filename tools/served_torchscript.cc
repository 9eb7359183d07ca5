#include "tools/served_torchscript.h"

#include "devices/device_info.h"
#include "devices/dtype.h"
#include "infergate/v1/model_config.pb.h"

namespace infergate {

absl::StatusOr<std::shared_ptr<TorchScriptModel>> LoadServedTorchScript(const std::string& path,
                                                                        const std::vector<int64_t>& row_shape,
                                                                        v1::DataType dtype, int64_t max_batch,
                                                                        bool optimize) {
  if (max_batch < 1) return absl::InvalidArgumentError("max_batch: must be at least 1");
  v1::ModelConfig config;
  config.set_name("measured");
  config.set_max_batch_size(static_cast<uint32_t>(max_batch));
  v1::TensorSpec* input = config.add_inputs();
  input->set_name("INPUT__0");
  input->set_dtype(dtype);
  for (int64_t d : row_shape) input->add_dims(d);
  if (!optimize) config.set_torchscript_optimization(v1::TORCHSCRIPT_OPTIMIZE_OFF);
  return TorchScriptModel::Load(path, config, DeviceInfo{}, DType::kFloat32);
}

}  // namespace infergate
