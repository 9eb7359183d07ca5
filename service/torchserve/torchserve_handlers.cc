#include "service/torchserve/torchserve_handlers.h"

#include <ATen/ATen.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "scheduler/repository/class_labels.h"
#include "service/http/json_scan.h"
#include "service/torchserve/image_decode.h"
#include "service/torchserve/image_preprocess.h"
#include "service/torchserve/instance_codec.h"
#include "service/torchserve/instance_text.h"

namespace infergate {
namespace {

absl::StatusOr<at::Tensor> ImageInput(absl::string_view bytes, absl::string_view where,
                                      const HandlerInputLimits& limits) {
  // Held until the preprocessed tensor is made: the decoded pixels, what
  // the decoder holds besides them, and the preprocessing's own work.
  InflightBudget::Reservation held;
  ImageDecodeOptions options;
  options.max_aspect_ratio = kMaxImageAspectRatio;
  options.keep_going = limits.keep_going;
  options.reserve = [&](uint64_t width, uint64_t height, uint64_t decoder_bytes) -> absl::Status {
    if (limits.budget == nullptr) return absl::OkStatus();
    const uint64_t bytes = width * height * 3 + decoder_bytes + ImageClassifierWorkBytes(static_cast<int64_t>(height)) +
                           uint64_t{3} * 224 * 224 * sizeof(float);
    absl::StatusOr<InflightBudget::Reservation> r = limits.budget->Reserve(bytes);
    if (!r.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat(where, ": the ", width, "x", height, " image needs ", bytes,
                                                       " bytes to decode and preprocess, more than the in-flight "
                                                       "budget has free"));
    }
    held = *std::move(r);
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(RgbImage image, DecodeImage(bytes, where, options));
  if (limits.keep_going) {
    RETURN_IF_ERROR(limits.keep_going());
  }
  return ImageClassifierInput(image);
}

// The image in `text`: base64 (standard or URL-safe alphabet) of a JPEG or PNG.
absl::StatusOr<at::Tensor> Base64ImageInput(const std::string& text, absl::string_view where,
                                            const HandlerInputLimits& limits) {
  // The decoded bytes (three quarters of the text) count while they live.
  InflightBudget::Reservation held;
  if (limits.budget != nullptr) {
    absl::StatusOr<InflightBudget::Reservation> r = limits.budget->Reserve(text.size() / 4 * 3 + 3);
    if (!r.ok()) {
      return absl::ResourceExhaustedError(
          absl::StrCat(where, ": the image's base64 text does not fit the in-flight budget: ", r.status().message()));
    }
    held = *std::move(r);
  }
  std::string bytes;
  if (!absl::Base64Unescape(text, &bytes) && !absl::WebSafeBase64Unescape(text, &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": expected an image's bytes in base64"));
  }
  return ImageInput(bytes, where, limits);
}

// JSON text of a probability as Python's float repr writes a double.
void AppendNumber(std::string& out, double v) { out += nlohmann::json(v).dump(); }

std::string TopClasses(const InferenceResult& result, int64_t row) {
  if (result.outputs.empty()) return "{}";
  const NamedTensor& output = result.outputs[0];
  at::Tensor scores = output.tensor.to(at::kFloat);
  if (row >= 0 && scores.dim() > 1) {
    scores = scores[row];
  } else if (scores.dim() > 1) {
    scores = scores.flatten();
  }
  if (scores.dim() == 0) scores = scores.reshape({1});
  const at::Tensor probabilities = at::softmax(scores, 0);
  const int64_t k = std::min<int64_t>(kTopClasses, probabilities.size(0));
  const auto [top, classes] = at::topk(probabilities, k);
  const std::vector<std::string>* labels = result.labels ? result.labels->For(output.name) : nullptr;
  // Most likely first: an object whose members keep that order.
  std::string out = "{";
  for (int64_t i = 0; i < k; ++i) {
    const int64_t index = classes[i].item<int64_t>();
    const std::string name =
        labels != nullptr && index < static_cast<int64_t>(labels->size()) ? (*labels)[index] : absl::StrCat(index);
    if (i > 0) out += ", ";
    out += nlohmann::json(name).dump();
    out += ": ";
    AppendNumber(out, top[i].item<float>());
  }
  return out + "}";
}

}  // namespace

const nlohmann::json& InstanceValue(const nlohmann::json& instance) {
  if (instance.is_object()) {
    for (const char* key : {"data", "body"}) {
      if (auto it = instance.find(key); it != instance.end()) return *it;
    }
  }
  return instance;
}

absl::StatusOr<at::Tensor> HandlerInput(const PredictionTarget& target, const nlohmann::json& value,
                                        absl::string_view where, const HandlerInputLimits& limits) {
  if (target.handler == MarHandler::kImageClassifier) {
    const nlohmann::json* v = &value;
    if (v->is_object()) {
      if (auto b64 = v->find("b64"); b64 != v->end()) v = &*b64;
    }
    if (v->is_string()) return Base64ImageInput(v->get<std::string>(), where, limits);
    if (!v->is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected an image (base64 text) or a preprocessed tensor (a nested list)"));
    }
    return InstanceTensor(*v, DType::kFloat32, where, limits.codec);
  }
  return InstanceTensor(value, target.input_dtype, where, limits.codec);
}

absl::StatusOr<at::Tensor> HandlerInputFromBytes(const PredictionTarget& target, absl::string_view bytes,
                                                 absl::string_view where, const HandlerInputLimits& limits) {
  if (target.handler == MarHandler::kImageClassifier && LooksLikeImage(bytes)) return ImageInput(bytes, where, limits);
  if (target.handler != MarHandler::kImageClassifier) {
    // A list of numbers read from the text; anything else from the tree.
    if (std::optional<at::Tensor> tensor = InstanceTensorFromText(bytes, target.input_dtype, limits.codec)) {
      return *std::move(tensor);
    }
  }
  absl::StatusOr<nlohmann::json> value = ParseBoundedJson(bytes, where);
  if (!value.ok()) {
    if (target.handler == MarHandler::kImageClassifier) {
      // Not JSON: base64 text of an image, as some clients send it.
      return Base64ImageInput(std::string(bytes), where, limits);
    }
    return absl::InvalidArgumentError(
        absl::StrCat(value.status().message(), "; base_handler takes a JSON list (or {\"data\": list})"));
  }
  return HandlerInput(target, InstanceValue(*value), where, limits);
}

std::function<absl::Status()> StopAt(Clock::time_point deadline, std::shared_ptr<CancelSignal> cancelled,
                                     std::string where) {
  return [deadline, cancelled = std::move(cancelled), where = std::move(where)]() -> absl::Status {
    if (cancelled && cancelled->fired()) {
      return absl::CancelledError(absl::StrCat(where, ": the client left while its input was prepared"));
    }
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(where, ": the deadline passed while its input was prepared"));
    }
    return absl::OkStatus();
  };
}

std::string HandlerOutput(MarHandler handler, const InferenceResult& result, int64_t row) {
  if (handler == MarHandler::kImageClassifier) return TopClasses(result, row);
  return PredictionJson(result.outputs, row).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace infergate
