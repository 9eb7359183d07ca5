// libFuzzer target: arbitrary bytes through request parsing, the wire
// tensor checks and input matching exactly as the server runs them, and
// through model-config parsing. The first byte picks the path. The last step
// of decoding (at::from_blob over checked bytes) is LibTorch's, whose 1.13
// headers do not compile with clang in C++20, so it is left out here.
//   build-fuzz/tests/fuzz/request_fuzzer tests/fuzz/corpus -max_total_time=600

#include <cstddef>
#include <cstdint>
#include <string>

#include "devices/device_id.h"
#include "infergate/v1/inference.pb.h"
#include "scheduler/input_signature.h"
#include "scheduler/model_config.h"
#include "scheduler/model_name.h"
#include "scheduler/model_repository.h"
#include "service/wire_tensor.h"

namespace {

using namespace infergate;

InputSignature MlpSignature() {
  InputSignature sig;
  sig.max_batch_size = 64;
  sig.inputs.push_back({"x", DType::kFloat32, std::vector<int64_t>{256}});
  return sig;
}

InputSignature PairSignature() {
  InputSignature sig;
  sig.inputs.push_back({"a", std::nullopt, std::nullopt});
  sig.inputs.push_back({"b", DType::kInt64, std::vector<int64_t>{-1, 3}});
  return sig;
}

void FuzzRequest(const uint8_t* data, size_t size) {
  v1::InferRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return;
  // The same checks, in the same order, as InferenceServiceImpl::Infer and Scheduler::Plan.
  (void)PrecisionFromProto(req.precision());
  (void)ValidateModelName(req.model());
  if (!req.version().empty()) (void)ParseVersion(req.version(), "version");
  (void)ParseDeviceRequest(req.device());
  CodecLimits limits;
  limits.max_elements = int64_t{1} << 20;  // keep allocations small under ASan
  std::vector<WireTensorInfo> infos;
  for (int i = 0; i < req.inputs_size(); ++i) {
    absl::StatusOr<WireTensorInfo> info = ValidateWireTensor(req.inputs(i), "inputs[i]", limits);
    if (!info.ok()) return;
    infos.push_back(*std::move(info));
  }
  std::vector<TensorMeta> metas;
  for (size_t i = 0; i < infos.size(); ++i) {
    metas.push_back({req.inputs(static_cast<int>(i)).name(), infos[i].dtype, infos[i].shape});
  }
  (void)MatchInputs(MlpSignature(), metas, "mlp");
  (void)MatchInputs(PairSignature(), metas, "pair");
  (void)BatchRows(MlpSignature(), metas);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 4 == 0) {
    (void)ParseModelConfig(std::string(reinterpret_cast<const char*>(data + 1), size - 1), "fuzz");
  } else {
    FuzzRequest(data + 1, size - 1);
  }
  return 0;
}
