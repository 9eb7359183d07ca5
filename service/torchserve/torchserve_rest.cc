#include "service/torchserve/torchserve_rest.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/caught_exception.h"
#include "common/client_text.h"
#include "common/mutex.h"
#include "common/status_macros.h"
#include "proto/proto_enums.h"
#include "service/call/handler_work_pool.h"
#include "service/call/http_call.h"
#include "service/call/infer_call.h"
#include "service/http/cross_origin.h"
#include "service/http/json_scan.h"
#include "service/http/multipart_form.h"
#include "service/torchserve/instance_codec.h"
#include "service/torchserve/instance_text.h"
#include "service/torchserve/torchserve_handlers.h"

namespace infergate {
namespace {

HttpResponse JsonAnswer(int status, const nlohmann::json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

// TorchServe's exception names for the codes its API answers with.
absl::string_view TorchServeErrorType(int status) {
  switch (status) {
    case 400: return "BadRequestException";
    case 401:
    case 403: return "InvalidKeyException";
    case 404: return "ModelNotFoundException";
    case 405: return "MethodNotAllowedException";
    case 413: return "RequestTooLargeException";
    case 429:
    case 503: return "ServiceUnavailableException";
    case 501: return "ServiceUnavailableException";
    case 504: return "RequestTimeoutException";
    default: return "InternalServerException";
  }
}

HttpResponse TorchServeError(const absl::Status& status) {
  const int code = HttpStatusFor(status);
  HttpResponse r =
      JsonAnswer(code, {{"code", code}, {"type", TorchServeErrorType(code)}, {"message", status.message()}});
  if (status.code() == absl::StatusCode::kUnauthenticated) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

HttpResponse KServeError(const absl::Status& status) {
  HttpResponse r = JsonAnswer(HttpStatusFor(status), {{"error", ForClients(status.message())}});
  if (status.code() == absl::StatusCode::kUnauthenticated) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

bool IsManagementMutation(const HttpRequest& head) {
  return (head.method == "DELETE" || head.method == "POST" || head.method == "PUT") &&
         absl::StartsWith(head.path, "/models");
}

}  // namespace

// The calls one HTTP prediction makes (one per batch of instances), joined:
// the answer goes out when the last call ends, with every row in order or
// the first error.
struct TorchServeRest::Prediction {
  Protocol protocol;
  HttpResponder respond;
  std::vector<std::string> rows;  // JSON text; each call writes only its own rows
  // The instances' input tensors' bytes, held until the answer is sent
  // (this struct goes when the last call has ended).
  InflightBudget::Reservation rows_held;
  InflightBudget* budget = nullptr;  // counts the answer while it is written
  Mutex mu;
  size_t calls_left ABSL_GUARDED_BY(mu) = 0;
  absl::Status first_error ABSL_GUARDED_BY(mu);
  std::vector<std::weak_ptr<InferCall>> calls ABSL_GUARDED_BY(mu);

  // One call ended; the last one answers (outside the lock).
  void CallEnded(const absl::Status& status) {
    absl::Status answer;
    {
      MutexLock lock(mu);
      if (!status.ok() && first_error.ok()) first_error = status;
      if (--calls_left > 0) return;
      answer = first_error;
    }
    if (!answer.ok()) return respond(protocol == Protocol::kTorchServe ? TorchServeError(answer) : KServeError(answer));
    if (protocol == Protocol::kKServeV1) {
      HttpResponse r;
      r.body = absl::StrCat("{\"predictions\": [", absl::StrJoin(rows, ", "), "]}");
      rows.clear();
      r.held = HoldAnswer(budget, r.body.size());
      return respond(std::move(r));
    }
    HttpResponse r;
    r.body = rows.empty() ? "null" : std::move(rows[0]);
    r.held = HoldAnswer(budget, r.body.size());
    respond(std::move(r));
  }

  // Answers with `status` alone, before any call began.
  void Refuse(const absl::Status& status) {
    {
      MutexLock lock(mu);
      calls_left = 1;
    }
    CallEnded(status);
  }

  void CancelAll() {
    std::vector<std::shared_ptr<InferCall>> live;
    {
      MutexLock lock(mu);
      for (const std::weak_ptr<InferCall>& c : calls) {
        if (std::shared_ptr<InferCall> call = c.lock()) live.push_back(std::move(call));
      }
    }
    for (const std::shared_ptr<InferCall>& call : live) call->Cancel();
  }
};

TorchServeRest::TorchServeRest(InferenceCore& core, const CallEnvironment& environment,
                               const TorchServeCatalog* catalog)
    : core_(core), environment_(environment), models_(core, catalog) {}

bool TorchServeRest::Serves(absl::string_view path) {
  return path == "/ping" || path == "/models" || absl::StartsWith(path, "/models/") ||
         absl::StartsWith(path, "/predictions/") || path == "/v1/models" || absl::StartsWith(path, "/v1/models/");
}

std::optional<HttpResponse> TorchServeRest::Screen(const HttpRequest& head) const {
  auto error = [&head](const absl::Status& s) {
    return absl::StartsWith(head.path, "/v1/") ? KServeError(s) : TorchServeError(s);
  };
  if (absl::Status s = CheckSameOrigin(head); !s.ok()) return error(s);
  if (head.path == "/ping") return std::nullopt;
  const TokenAuth::Role role = IsManagementMutation(head) ? TokenAuth::Role::kAdmin : TokenAuth::Role::kInference;
  if (absl::Status s = environment_.auth().Check(head.Header("authorization"), role); !s.ok()) return error(s);
  const absl::string_view host = head.Header("host");
  if (absl::Status s = role == TokenAuth::Role::kAdmin ? environment_.auth().CheckAdminHost(host)
                                                       : environment_.auth().CheckInferenceHost(host);
      !s.ok()) {
    return error(s);
  }
  return std::nullopt;
}

void TorchServeRest::Handle(std::shared_ptr<HttpRequest> request, HttpResponder respond) {
  const bool kserve = absl::StartsWith(request->path, "/v1/");
  auto error = [kserve](const absl::Status& s) { return kserve ? KServeError(s) : TorchServeError(s); };
  if (absl::Status s = CheckSameOrigin(*request); !s.ok()) return respond(error(s));
  std::vector<std::string> parts = absl::StrSplit(request->path, '/', absl::SkipEmpty());
  const std::string& method = request->method;
  auto wrong_method = [&](const char* allowed) {
    HttpResponse r = error(absl::InvalidArgumentError(
        absl::StrCat(method, " is not served on ", request->path.substr(0, 128), "; use ", allowed)));
    r.status = 405;
    if (!kserve)
      r.body = nlohmann::json({{"code", 405},
                               {"type", TorchServeErrorType(405)},
                               {"message", absl::StrCat(method, " is not served here; use ", allowed)}})
                   .dump();
    r.headers.emplace_back("Allow", allowed);
    return r;
  };

  if (request->path == "/ping") {
    if (method != "GET" && method != "POST") return respond(wrong_method("GET"));
    const bool healthy = core_.ready() && !environment_.draining();
    // TorchServe answers 500 while it cannot serve.
    return respond(JsonAnswer(healthy ? 200 : 500, {{"status", healthy ? "Healthy" : "Unhealthy"}}));
  }
  if (parts[0] == "predictions") {
    if (method != "POST" && method != "PUT") return respond(wrong_method("POST"));
    if (parts.size() < 2 || parts.size() > 3) {
      return respond(error(absl::NotFoundError("use /predictions/{model} or /predictions/{model}/{version}")));
    }
    return Predict(std::move(request), Protocol::kTorchServe, parts[1], parts.size() == 3 ? parts[2] : "",
                   std::move(respond));
  }
  if (parts[0] == "models") {
    if (parts.size() > 3) return respond(error(absl::NotFoundError("use /models, /models/{model}[/{version}]")));
    if (method == "GET") {
      if (parts.size() == 1) return respond(ListModels());
      return respond(DescribeModel(parts[1], parts.size() == 3 ? parts[2] : ""));
    }
    if (method == "DELETE" && parts.size() >= 2) {
      return respond(Unregister(*request, parts[1], parts.size() == 3 ? parts[2] : ""));
    }
    if (method == "POST" || method == "PUT") {
      return respond(TorchServeError(absl::UnimplementedError(
          "models are registered by placing their archive in the model store (read at start), and scaled by "
          "infergate's per-device workers (--cpu-workers, --accelerator-workers); POST and PUT /models are not "
          "served")));
    }
    return respond(wrong_method("GET, DELETE"));
  }
  // KServe V1: /v1/models[/{model}[:predict]]
  if (parts.size() == 2) {
    if (method != "GET") return respond(wrong_method("GET"));
    nlohmann::json names = nlohmann::json::array();
    absl::StatusOr<std::vector<ModelStatus>> models = core_.Models();
    if (!models.ok()) return respond(KServeError(models.status()));
    for (const ModelStatus& m : *models) names.push_back(m.name);
    return respond(JsonAnswer(200, {{"models", std::move(names)}}));
  }
  if (parts.size() != 3) return respond(KServeError(absl::NotFoundError("use /v1/models/{model}[:predict]")));
  const size_t colon = parts[2].rfind(':');
  if (colon == std::string::npos) {
    if (method != "GET") return respond(wrong_method("GET"));
    return respond(KServeModel(parts[2]));
  }
  const std::string model = parts[2].substr(0, colon);
  const std::string verb = parts[2].substr(colon + 1);
  if (verb != "predict") {
    return respond(KServeError(absl::UnimplementedError(
        absl::StrCat("':", verb.substr(0, 32), "' is not served; use ':predict' (explanations are not served)"))));
  }
  if (method != "POST") return respond(wrong_method("POST"));
  Predict(std::move(request), Protocol::kKServeV1, model, "", std::move(respond));
}

void TorchServeRest::Predict(std::shared_ptr<HttpRequest> request, Protocol protocol, const std::string& model,
                             const std::string& version, HttpResponder respond) {
  auto prediction = std::make_shared<Prediction>();
  prediction->protocol = protocol;
  prediction->respond = std::move(respond);
  prediction->budget = environment_.budget();
  absl::StatusOr<PredictionTarget> target = models_.Resolve(model, version);
  if (!target.ok()) return prediction->Refuse(target.status());
  // Decoding and preprocessing images is CPU work of up to a second: it
  // runs on the handler pool, never on this HTTP I/O thread.
  HandlerWorkPool* pool = environment_.handler_pool();
  if (target->handler != MarHandler::kImageClassifier || pool == nullptr) {
    return PredictWith(std::move(request), *std::move(target), model, version, std::move(prediction));
  }
  auto work = [this, request, target = *std::move(target), model, version, prediction]() mutable {
    const absl::Status failed = RunCatching("preparing a prediction", [&] {
      PredictWith(std::move(request), std::move(target), model, version, prediction);
    });
    if (!failed.ok()) prediction->Refuse(failed);
  };
  if (!pool->TrySubmit(std::move(work))) {
    prediction->Refuse(
        absl::ResourceExhaustedError(absl::StrCat("model '", model, "': ", pool->max_queued(),
                                                  " requests already wait to have their images decoded; retry later")));
  }
}

struct TorchServeRest::Instances {
  std::vector<at::Tensor> rows;
  std::string field;  // what the rows came from, for errors: "body" or "instances"
};

void TorchServeRest::PredictWith(std::shared_ptr<HttpRequest> request, PredictionTarget target,
                                 const std::string& model, const std::string& version,
                                 std::shared_ptr<Prediction> prediction) {
  absl::StatusOr<Clock::time_point> deadline = RestDeadline(*request, Clock::now());
  if (!deadline.ok()) return prediction->Refuse(deadline.status());
  // The body's instances as the model's inputs. A JSON parse tree is the
  // largest thing the call holds, some tens of bytes per value: it counts
  // against the in-flight budget while it lives.
  const JsonScan scan = ScanJson(request->body);
  InflightBudget::Reservation tree;
  InflightBudget* budget = environment_.budget();
  if (budget != nullptr) {
    absl::StatusOr<InflightBudget::Reservation> reserved = budget->Reserve(scan.TreeBytes());
    if (!reserved.ok()) {
      if (InferCallObserver* o = environment_.observer()) o->OnAdmissionRejection(RejectionReason::kInflightBytes);
      return prediction->Refuse(absl::ResourceExhaustedError(
          absl::StrCat("the JSON body's parse tree (about ", scan.TreeBytes(),
                       " bytes) does not fit the in-flight budget: ", reserved.status().message())));
    }
    tree = *std::move(reserved);
  }
  const HandlerInputLimits limits{
      environment_.limits(), budget,
      StopAt(std::min(*deadline, Clock::now() + kHandlerInputTimeout), request->client_gone, "body")};
  absl::StatusOr<Instances> instances = prediction->protocol == Protocol::kTorchServe
                                            ? DecodeTorchServeInstance(*request, target, limits, *prediction)
                                            : DecodeKServeV1Instances(*request, target, limits, *prediction);
  if (!instances.ok()) return prediction->Refuse(instances.status());
  tree = InflightBudget::Reservation();  // the parse tree is gone
  SubmitInBatches(request, target, model, version, *deadline, *std::move(instances), prediction);
}

absl::Status TorchServeRest::ChargeInstance(Prediction& prediction, const at::Tensor& row,
                                            absl::string_view where) const {
  // Each instance's tensor counts against the budget from the moment it
  // is made until the prediction is answered: a thousand tiny images
  // become a thousand 602 KB tensors.
  InflightBudget* budget = environment_.budget();
  if (budget == nullptr) return absl::OkStatus();
  const uint64_t bytes = row.nbytes();
  if (absl::Status s = budget->Extend(prediction.rows_held, bytes); !s.ok()) {
    if (InferCallObserver* o = environment_.observer()) o->OnAdmissionRejection(RejectionReason::kInflightBytes);
    return absl::ResourceExhaustedError(
        absl::StrCat(where, ": its input tensor (", bytes, " bytes) does not fit the in-flight budget: ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<TorchServeRest::Instances> TorchServeRest::DecodeTorchServeInstance(const HttpRequest& request,
                                                                                   const PredictionTarget& target,
                                                                                   const HandlerInputLimits& limits,
                                                                                   Prediction& prediction) const {
  Instances out;
  out.field = "body";
  absl::string_view payload = request.body;
  if (const absl::string_view type = request.Header("content-type"); IsMultipartForm(type)) {
    ASSIGN_OR_RETURN(payload, MultipartFormField(type, request.body));
  }
  absl::StatusOr<at::Tensor> row = [&] {
    HandlerInputTimer timer(environment_.observer(), target.model);
    return HandlerInputFromBytes(target, payload, out.field, limits);
  }();
  if (!row.ok()) return row.status();
  RETURN_IF_ERROR(ChargeInstance(prediction, *row, out.field));
  out.rows.push_back(*std::move(row));
  return out;
}

std::optional<absl::StatusOr<TorchServeRest::Instances>> TorchServeRest::KServeV1InstancesFromText(
    const HttpRequest& request, const PredictionTarget& target, const HandlerInputLimits& limits,
    Prediction& prediction) const {
  std::optional<std::vector<absl::string_view>> texts = V1InstanceTexts(request.body);
  if (!texts || !CheckTensorCount(static_cast<int64_t>(texts->size()), "instances", limits.codec).ok()) {
    return std::nullopt;
  }
  Instances out;
  out.field = "instances";
  out.rows.reserve(texts->size());
  for (absl::string_view text : *texts) {
    HandlerInputTimer timer(environment_.observer(), target.model);
    std::optional<at::Tensor> row = InstanceTensorFromText(text, target.input_dtype, limits.codec);
    if (!row) return std::nullopt;
    out.rows.push_back(*std::move(row));
  }
  // Charged in order once all are read, as the tree's decoding charges
  // them (the first that does not fit is the same one).
  for (size_t i = 0; i < out.rows.size(); ++i) {
    absl::Status charged = ChargeInstance(prediction, out.rows[i], absl::StrCat("instances[", i, "]"));
    if (!charged.ok()) return absl::StatusOr<Instances>(charged);
  }
  return absl::StatusOr<Instances>(std::move(out));
}

absl::StatusOr<TorchServeRest::Instances> TorchServeRest::DecodeKServeV1Instances(const HttpRequest& request,
                                                                                  const PredictionTarget& target,
                                                                                  const HandlerInputLimits& limits,
                                                                                  Prediction& prediction) const {
  if (target.handler != MarHandler::kImageClassifier) {
    // Instances of numbers read from the text; anything else from the tree.
    if (std::optional<absl::StatusOr<Instances>> instances =
            KServeV1InstancesFromText(request, target, limits, prediction)) {
      return *std::move(instances);
    }
  }
  ASSIGN_OR_RETURN(const nlohmann::json body, ParseBoundedJson(request.body, "the V1 request body"));
  auto it = body.is_object() ? body.find("instances") : body.end();
  if (!body.is_object() || it == body.end() || !it->is_array()) {
    return absl::InvalidArgumentError("the V1 request body must be {\"instances\": [...]}");
  }
  if (it->empty()) return absl::InvalidArgumentError("instances: is empty");
  Instances out;
  out.field = "instances";
  RETURN_IF_ERROR(CheckTensorCount(static_cast<int64_t>(it->size()), out.field, limits.codec));
  if (target.handler == MarHandler::kImageClassifier && it->size() > kMaxImageInstances) {
    return absl::InvalidArgumentError(absl::StrCat("instances: ", it->size(),
                                                   " images in one request; image_classifier takes at most ",
                                                   kMaxImageInstances, " (send more requests)"));
  }
  out.rows.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string where = absl::StrCat("instances[", i, "]");
    absl::StatusOr<at::Tensor> row = [&] {
      HandlerInputTimer timer(environment_.observer(), target.model);
      return HandlerInput(target, InstanceValue((*it)[i]), where, limits);
    }();
    if (!row.ok()) return row.status();
    RETURN_IF_ERROR(ChargeInstance(prediction, *row, where));
    out.rows.push_back(*std::move(row));
  }
  return out;
}

void TorchServeRest::SubmitInBatches(const std::shared_ptr<HttpRequest>& request, const PredictionTarget& target,
                                     const std::string& model, const std::string& version, Clock::time_point deadline,
                                     Instances instances, const std::shared_ptr<Prediction>& prediction) {
  const std::vector<at::Tensor>& rows = instances.rows;
  const size_t per_call = target.InstancesPerCall();
  const size_t call_count = (rows.size() + per_call - 1) / per_call;
  prediction->rows.resize(rows.size());
  {
    MutexLock lock(prediction->mu);
    prediction->calls_left = call_count;
  }
  const uint64_t bytes_per_call = request->body.size() / call_count + 1;
  for (size_t c = 0; c < call_count; ++c) {
    const size_t first = c * per_call;
    const size_t count = std::min(per_call, rows.size() - first);
    std::shared_ptr<InferCall> call =
        InferCall::Begin(environment_, model, [prediction](const absl::Status& s) { prediction->CallEnded(s); });
    {
      MutexLock lock(prediction->mu);
      prediction->calls.push_back(call);
    }
    if (environment_.tracing()) {
      TraceHttpCall(*call, *request,
                    prediction->protocol == Protocol::kKServeV1 ? "POST /v1/models/{model_name}:predict"
                    : version.empty()                           ? "POST /predictions/{model_name}"
                                                                : "POST /predictions/{model_name}/{model_version}",
                    model);
    }
    if (!call->Admit([&request] { return request->Header("authorization"); }, bytes_per_call)) continue;
    InferenceRequest req;
    req.model = model;
    req.version = target.version;
    req.deadline = deadline;
    absl::StatusOr<at::Tensor> input = target.Input(rows, first, count, instances.field);
    if (!input.ok()) {
      call->Refuse(input.status());
      continue;
    }
    req.inputs.push_back({"", *std::move(input)});
    const bool batched = target.max_batch_size > 0;
    const MarHandler handler = target.handler;
    call->Submit(std::move(req), [prediction, first, count, batched, handler](InferenceResult& result) {
      for (size_t i = 0; i < count; ++i) {
        prediction->rows[first + i] = HandlerOutput(handler, result, batched ? static_cast<int64_t>(i) : -1);
      }
      return absl::OkStatus();
    });
  }
  // A client that closes its connection cancels every call still running
  // (at once, when it has already gone).
  if (request->client_gone) {
    request->client_gone->Subscribe([weak = std::weak_ptr<Prediction>(prediction)] {
      if (std::shared_ptr<Prediction> p = weak.lock()) p->CancelAll();
    });
  }
}

HttpResponse TorchServeRest::ListModels() const {
  absl::StatusOr<std::vector<ModelStatus>> models = core_.Models();
  if (!models.ok()) return TorchServeError(models.status());
  nlohmann::json list = nlohmann::json::array();
  for (const ModelStatus& m : *models) {
    const TorchServeModel* archived = models_.Archived(m.name);
    const std::string url = archived ? archived->archives.at(archived->default_version) : m.name;
    list.push_back({{"modelName", m.name}, {"modelUrl", url}});
  }
  return JsonAnswer(200, {{"models", std::move(list)}});
}

HttpResponse TorchServeRest::DescribeModel(const std::string& model, const std::string& version) const {
  absl::StatusOr<ModelStatus> status = core_.Model(model);
  if (!status.ok()) return TorchServeError(status.status());
  const TorchServeModel* archived = models_.Archived(model);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, number] : models_.VersionNames(*status)) {
    const bool is_default = models_.IsDefaultVersion(*status, name, number);
    if (version.empty() ? !is_default : (version != "all" && version != name)) continue;
    const bool ready = std::find(status->versions.begin(), status->versions.end(), number) != status->versions.end();
    nlohmann::json workers = nlohmann::json::array();
    for (const ModelKey& key : status->loaded) {
      if (key.version != number) continue;
      workers.push_back({{"id", absl::StrCat(key.device.ToString(), "/", DTypeName(key.dtype))},
                         {"status", "READY"},
                         {"gpu", key.device.kind != DeviceKind::kCpu}});
    }
    const TorchServeVersionSettings s = archived ? archived->settings : TorchServeVersionSettings{};
    out.push_back({{"modelName", model},
                   {"modelVersion", name},
                   {"modelUrl", archived ? archived->archives.at(name) : model},
                   {"runtime", "infergate"},
                   {"minWorkers", s.min_workers},
                   {"maxWorkers", s.max_workers},
                   {"batchSize", std::max<uint32_t>(status->config.max_batch_size(), 1)},
                   {"maxBatchDelay", status->config.dynamic_batching().max_queue_delay_us() / 1000},
                   {"loadedAtStartup", true},
                   {"status", ready ? "READY" : "UNAVAILABLE"},
                   {"handler", archived ? MarHandlerName(archived->handler) : "base_handler"},
                   {"workers", std::move(workers)}});
  }
  if (out.empty()) {
    return TorchServeError(absl::NotFoundError(
        absl::StrCat("Model version '", version.substr(0, 64), "' of model '", model, "' not found")));
  }
  return JsonAnswer(200, out);
}

HttpResponse TorchServeRest::KServeModel(const std::string& model) const {
  absl::StatusOr<PredictionTarget> target = models_.Resolve(model, "");
  if (!target.ok() && target.status().code() == absl::StatusCode::kNotFound) return KServeError(target.status());
  return JsonAnswer(200, {{"name", model}, {"ready", target.ok() && core_.ready() && !environment_.draining()}});
}

HttpResponse TorchServeRest::Unregister(const HttpRequest& request, const std::string& model,
                                        const std::string& version) {
  if (absl::Status s = environment_.auth().Check(request.Header("authorization"), TokenAuth::Role::kAdmin); !s.ok()) {
    return TorchServeError(s);
  }
  LoadRequest unload;
  unload.model = model;
  if (!version.empty()) {
    absl::StatusOr<PredictionTarget> target = models_.Resolve(model, version);
    if (!target.ok()) return TorchServeError(target.status());
    unload.version = target->version;
  }
  absl::StatusOr<size_t> n = core_.UnloadModel(unload);
  if (!n.ok()) return TorchServeError(n.status());
  return JsonAnswer(200, {{"status", absl::StrCat("Model \"", model, "\" unregistered")}});
}

}  // namespace infergate
