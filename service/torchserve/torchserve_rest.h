#pragma once
// TorchServe's inference and management APIs and KServe's V1 protocol,
// over HTTP beside the Open Inference Protocol on --http-address, so that
// clients of KServe's TorchServe runtime keep working unchanged:
//   GET    /ping                                 {"status": "Healthy"}
//   POST   /predictions/{model}[/{version}]      the body is one request
//   GET    /models, /models/{model}[/{version}|/all]   (read-only listing)
//   DELETE /models/{model}[/{version}]           unload (admin token)
//   GET    /v1/models, /v1/models/{model}        {"name": ..., "ready": ...}
//   POST   /v1/models/{model}:predict            {"instances": [...]} ->
//                                                {"predictions": [...]}
// Models from a TorchServe model store (torchserve_store.h) are called by
// TorchServe's version names ("1.0") and run their archive's handler; any
// other repository model is served with base_handler's rules and its
// repository version numbers. base_handler: an instance is a number or a
// nested list (or an object whose "data" or "body" holds one), made a
// tensor of the model's declared input dtype (float32 when it declares
// none), stacked with the request's other instances into batches of at
// most the model's max_batch_size; each answer row is the output's row as
// lists ({"name": rows} for several outputs).
//
// Inference takes the front ends' one call path (infer_call.h), one call
// per batch: the same tokens, drain, in-flight budget, deadline header,
// cancellation when the client goes away, metrics and tracing. Errors are
// TorchServe's {"code", "type", "message"} on its routes and {"error"} on
// KServe's, with the status codes of http_call.h.
//
// Threading: Handle runs on the HTTP server's threads and never blocks:
// image_classifier's decoding and preprocessing run on the front end's
// handler pool (handler_work_pool.h), which must be stopped before this
// goes; answers are written from the core's completion callbacks.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/core/inference_core.h"
#include "scheduler/repository/torchserve/torchserve_store.h"
#include "service/call/call_environment.h"
#include "service/http/http_server.h"
#include "service/torchserve/torchserve_models.h"

namespace infergate {

struct HandlerInputLimits;

class TorchServeRest {
 public:
  // `catalog` (null: no TorchServe store) must outlive this, as must `core`
  // and `environment`.
  TorchServeRest(InferenceCore& core, const CallEnvironment& environment, const TorchServeCatalog* catalog);

  // Whether `path` is one of this API's routes (else the Open Inference
  // Protocol's REST API answers it).
  static bool Serves(absl::string_view path);

  // Before the body is read: cross-origin requests and missing tokens are
  // refused (/ping needs none; DELETE, POST and PUT on /models need the
  // admin token; the rest the inference token).
  std::optional<HttpResponse> Screen(const HttpRequest& head) const;

  void Handle(std::shared_ptr<HttpRequest> request, HttpResponder respond);

 private:
  enum class Protocol { kTorchServe, kKServeV1 };
  struct Prediction;  // one HTTP prediction's calls, joined

  void Predict(std::shared_ptr<HttpRequest> request, Protocol protocol, const std::string& model,
               const std::string& version, HttpResponder respond);
  struct Instances;  // a prediction's instances as the model's input rows

  // Predict's work once the target is known: the instances made into the
  // model's inputs (on the handler pool for images), then the calls.
  void PredictWith(std::shared_ptr<HttpRequest> request, PredictionTarget target, const std::string& model,
                   const std::string& version, std::shared_ptr<Prediction> prediction);
  // The body's instances as the model's input rows, each charged to
  // `prediction`'s share of the in-flight budget as it is made: TorchServe's
  // one (the body, or a form's "data" field), KServe V1's "instances".
  absl::StatusOr<Instances> DecodeTorchServeInstance(const HttpRequest& request, const PredictionTarget& target,
                                                     const HandlerInputLimits& limits, Prediction& prediction) const;
  // A V1 body's instances read from their text (instance_text.h); nullopt
  // where the tree must decode it.
  std::optional<absl::StatusOr<Instances>> KServeV1InstancesFromText(const HttpRequest& request,
                                                                     const PredictionTarget& target,
                                                                     const HandlerInputLimits& limits,
                                                                     Prediction& prediction) const;
  absl::StatusOr<Instances> DecodeKServeV1Instances(const HttpRequest& request, const PredictionTarget& target,
                                                    const HandlerInputLimits& limits, Prediction& prediction) const;
  // Charges one instance's tensor to `prediction` until it is answered;
  // RESOURCE_EXHAUSTED naming `where` when it does not fit.
  absl::Status ChargeInstance(Prediction& prediction, const at::Tensor& row, absl::string_view where) const;
  // One call per batch of at most max_batch_size instances (a model without
  // batching takes each instance alone, as its whole input), joined by
  // `prediction`; a client that goes away cancels them.
  void SubmitInBatches(const std::shared_ptr<HttpRequest>& request, const PredictionTarget& target,
                       const std::string& model, const std::string& version, Clock::time_point deadline,
                       Instances instances, const std::shared_ptr<Prediction>& prediction);
  HttpResponse ListModels() const;
  HttpResponse DescribeModel(const std::string& model, const std::string& version) const;
  HttpResponse KServeModel(const std::string& model) const;
  HttpResponse Unregister(const HttpRequest& request, const std::string& model, const std::string& version);

  InferenceCore& core_;
  const CallEnvironment& environment_;
  const TorchServeModels models_;
};

}  // namespace infergate
