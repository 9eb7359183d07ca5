#pragma once
// TorchServe's built-in handlers, reimplemented: what one request (one
// instance) becomes as the model's input, and what one row of the model's
// answer becomes as the client's prediction.
//   base_handler      in: a number or nested list (instance_codec.h), as
//                     the model's input dtype; out: the output row as lists.
//   image_classifier  in: a JPEG or PNG (raw bytes, or base64 text in
//                     "data"/"body"/"b64"), decoded (image_decode.h) and
//                     preprocessed as torchvision does (image_preprocess.h);
//                     or a nested list taken as the preprocessed float
//                     tensor, as TorchServe's vision handler does; out:
//                     softmax over the classes, the top 5 as
//                     {"label": probability, ...}, most likely first, named
//                     by the model's labels (index_to_name.json) or by
//                     class index.
// Unlike TorchServe, a grayscale, palette or RGBA image is converted to
// RGB first (TorchServe's pipeline fails on them).
// Pure functions; thread-safe.

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cancel_signal.h"
#include "nlohmann/json.hpp"
#include "scheduler/model/inference_types.h"
#include "scheduler/repository/torchserve/mar_manifest.h"
#include "service/call/call_environment.h"
#include "service/call/inflight_budget.h"
#include "service/call/wire_tensor.h"
#include "service/torchserve/torchserve_models.h"

namespace infergate {

// How many classes image_classifier answers with.
inline constexpr int kTopClasses = 5;

// What an instance's value is: the value itself, or what an object's
// "data" or "body" holds (TorchServe's request rows, KServe's envelope).
const nlohmann::json& InstanceValue(const nlohmann::json& instance);

// The longest side of an image image_classifier takes, as a multiple of
// its shortest: panoramas pass, a 1 x 65,500 strip does not.
inline constexpr uint64_t kMaxImageAspectRatio = 100;

// The most images one KServe V1 request may carry for image_classifier:
// each becomes a 602 KB tensor.
inline constexpr size_t kMaxImageInstances = 128;

// How long making one request's inputs may take, whatever the client's
// deadline: an image of the largest allowed size takes about a second, and
// the decoding pool has a thread a core, so an image that takes longer
// (built to be slow) gives its thread back after this.
inline constexpr std::chrono::seconds kHandlerInputTimeout{5};

// What turning an instance into the model's input may use, and who may
// stop it.
struct HandlerInputLimits {
  const CodecLimits& codec;
  // An image's decoded pixels and preprocessing work count against it
  // while the instance is made (null: no byte limit); a V1 instance's
  // tensor while it is decoded.
  InflightBudget* budget = nullptr;
  // Polled while an image is decoded; its error (a deadline that passed, a
  // client that left) abandons the work. May be empty.
  std::function<absl::Status()> keep_going;
};

// The model input for one instance given as JSON (a REST or V1 body, after
// any {"data": ...} envelope); `where` names it in errors. RESOURCE_EXHAUSTED
// when what it needs does not fit the budget.
absl::StatusOr<at::Tensor> HandlerInput(const PredictionTarget& target, const nlohmann::json& value,
                                        absl::string_view where, const HandlerInputLimits& limits);

// The model input for one instance given as bytes (a raw REST body, a gRPC
// input entry): an image for image_classifier (raw, or base64), JSON text
// otherwise.
absl::StatusOr<at::Tensor> HandlerInputFromBytes(const PredictionTarget& target, absl::string_view bytes,
                                                 absl::string_view where, const HandlerInputLimits& limits);

// A keep_going for HandlerInputLimits: DEADLINE_EXCEEDED naming `where`
// once `deadline` has passed, CANCELLED once `cancelled` (may be null) is.
std::function<absl::Status()> StopAt(Clock::time_point deadline, std::shared_ptr<CancelSignal> cancelled,
                                     std::string where);

// Reports how long each instance's input took to `observer` (may be null),
// around HandlerInput or HandlerInputFromBytes.
class HandlerInputTimer {
 public:
  HandlerInputTimer(InferCallObserver* observer, const std::string& model)
      : observer_(observer), model_(model), start_(Clock::now()) {}
  ~HandlerInputTimer() {
    if (observer_ != nullptr) {
      observer_->OnHandlerInput(model_, std::chrono::duration<double>(Clock::now() - start_).count());
    }
  }
  HandlerInputTimer(const HandlerInputTimer&) = delete;
  HandlerInputTimer& operator=(const HandlerInputTimer&) = delete;

 private:
  InferCallObserver* const observer_;
  const std::string& model_;
  const Clock::time_point start_;
};

// Row `row` of `result` (-1: the whole answer of a model without batching)
// as the handler answers it, in JSON text.
std::string HandlerOutput(MarHandler handler, const InferenceResult& result, int64_t row);

}  // namespace infergate
