// libFuzzer target: arbitrary bytes through request parsing, the wire
// tensor checks and input matching exactly as the server runs them, through
// the REST API's JSON and binary bodies, and through model-config parsing. The first byte picks the path. The last step
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
#include "service/open_inference_datatype.h"
#include "service/open_inference_json.h"
#include "service/wire_tensor.h"

#include <nlohmann/json.hpp>

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

// A REST infer body (the first two bytes pick where the JSON ends, as the
// Inference-Header-Content-Length header does). Whatever parses is answered
// back as outputs, and that answer's JSON must itself be valid JSON.
void FuzzRestBody(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const size_t split = (static_cast<size_t>(data[0]) << 8 | data[1]);
  absl::string_view body(reinterpret_cast<const char*>(data + 2), size - 2);
  std::optional<uint64_t> json_length;
  if (split != 0xffff) json_length = std::min<size_t>(split, body.size());
  CodecLimits limits;
  limits.max_elements = int64_t{1} << 16;
  absl::StatusOr<RestInferRequest> parsed = ParseRestInferRequest(body, json_length, "m", "", limits);
  if (!parsed.ok()) return;
  inference::ModelInferResponse response;
  response.set_model_name("m");
  response.set_id(parsed->request.id());
  for (int i = 0; i < parsed->request.inputs_size(); ++i) {
    const auto& in = parsed->request.inputs(i);
    std::optional<DType> dtype = KnownDatatype(in.datatype());
    if (!dtype) __builtin_trap();  // the parser accepted a datatype it does not know
    const std::string& bytes = parsed->request.raw_input_contents(i);
    if (bytes.size() % ElementSize(*dtype) != 0) continue;  // a binary input of the wrong size: the decoder refuses it
    auto* out = response.add_outputs();
    out->set_name(in.name());
    out->set_datatype(in.datatype());
    *out->mutable_shape() = in.shape();
    response.add_raw_output_contents(bytes);
  }
  absl::StatusOr<RestBody> answer = WriteRestInferResponse(response, *parsed);
  if (!answer.ok()) return;
  const std::string json = answer->json_length ? answer->body.substr(0, *answer->json_length) : answer->body;
  if (!nlohmann::json::accept(json)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 4 == 0) {
    (void)ParseModelConfig(std::string(reinterpret_cast<const char*>(data + 1), size - 1), "fuzz");
  } else if (data[0] % 4 == 1) {
    FuzzRestBody(data + 1, size - 1);
  } else {
    FuzzRequest(data + 1, size - 1);
  }
  return 0;
}
