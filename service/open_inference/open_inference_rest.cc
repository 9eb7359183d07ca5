#include "service/open_inference/open_inference_rest.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "service/call/http_call.h"
#include "service/call/infer_call.h"
#include "service/http/content_encoding.h"
#include "service/http/cross_origin.h"
#include "service/http/json_scan.h"
#include "service/open_inference/open_inference_codec.h"
#include "service/open_inference/open_inference_extensions.h"
#include "service/open_inference/open_inference_json.h"
#include "service/open_inference/raw_infer_request.h"
#include "service/tracing/trace_settings.h"

namespace infergate {
namespace {

// /v2/trace/setting, or /v2/models/{m}/trace/setting (the path's parts).
template <typename Parts>
bool IsTraceSettingRoute(const Parts& parts) {
  return (parts.size() == 3 && parts[1] == "trace" && parts[2] == "setting") ||
         (parts.size() == 5 && parts[1] == "models" && parts[3] == "trace" && parts[4] == "setting");
}

// A JSON answer; an empty body is sent without a content type (a client
// must not be asked to parse nothing as JSON).
HttpResponse Json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  if (body.empty()) r.content_type.clear();
  r.body = std::move(body);
  return r;
}

HttpResponse Error(const absl::Status& status) {
  HttpResponse r = Json(HttpStatusFor(status), JsonError(status.message()));
  if (status.code() == absl::StatusCode::kUnauthenticated) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

HttpResponse Ok(const google::protobuf::Message& message) { return Json(200, ProtoToJson(message)); }

// Health answers: 200 for true, 400 for false (the protocol's convention,
// which Triton's clients read), with the JSON body the protocol's REST
// specification gives them ({"live": bool}, {"ready": bool}, and for a
// model {"name": ..., "ready": bool}), which KServe's InferenceRESTClient
// parses. Triton itself sends no body; its clients ignore one.
HttpResponse Health(const char* key, bool ok) {
  return Json(ok ? 200 : 400, absl::StrCat("{\"", key, "\":", ok ? "true" : "false", "}"));
}
HttpResponse ModelHealth(const std::string& model, bool ok) {
  return Json(ok ? 200 : 400, nlohmann::json{{"name", model}, {"ready", ok}}.dump());
}

HttpResponse NoRoute(const HttpRequest& request) {
  return Json(404, JsonError(absl::StrCat("no endpoint ", request.method, " ", request.path.substr(0, 128),
                                          "; see GET /v2 and /v2/models/{model}")));
}

HttpResponse WrongMethod(const HttpRequest& request, const char* allowed) {
  HttpResponse r = Json(405, JsonError(absl::StrCat(request.method, " is not served on ", request.path.substr(0, 128),
                                                    "; use ", allowed)));
  r.headers.emplace_back("Allow", allowed);
  return r;
}

}  // namespace

OpenInferenceRest::OpenInferenceRest(InferenceCore& core, const CallEnvironment& environment,
                                     std::string server_version, uint64_t max_body_bytes)
    : core_(core), environment_(environment), api_(core, std::move(server_version)), max_body_bytes_(max_body_bytes) {}

absl::Status OpenInferenceRest::InflateBody(HttpRequest& request) const {
  const absl::string_view encoding = request.Header("content-encoding");
  if (!IsEncodedBody(encoding)) return absl::OkStatus();
  // The inflated size counts against the in-flight budget before it is
  // allocated; the whole body counts again once the call is admitted.
  InflightBudget::Reservation inflating;
  auto account = [this, &inflating](uint64_t bytes) {
    InflightBudget* budget = environment_.budget();
    if (budget == nullptr) return absl::OkStatus();
    absl::Status s = budget->Extend(inflating, bytes);
    if (!s.ok())
      if (InferCallObserver* o = environment_.observer()) o->OnAdmissionRejection(RejectionReason::kInflightBytes);
    return s;
  };
  ASSIGN_OR_RETURN(request.body, DecodeContentEncoding(encoding, request.body, max_body_bytes_, account));
  return absl::OkStatus();
}

std::optional<HttpResponse> OpenInferenceRest::Screen(const HttpRequest& head) const {
  if (absl::Status s = CheckSameOrigin(head); !s.ok()) return Error(s);
  std::vector<absl::string_view> parts = absl::StrSplit(head.path, '/', absl::SkipEmpty());
  if (parts.empty() || parts[0] != "v2") return std::nullopt;          // no such route: 404 later
  if (parts.size() == 3 && parts[1] == "health") return std::nullopt;  // probes carry no token
  const bool admin = (parts.size() == 5 && parts[1] == "repository" && parts[2] == "models" &&
                      (parts[4] == "load" || parts[4] == "unload")) ||
                     (parts.size() == 2 && parts[1] == "logging" && head.method == "POST") ||
                     (head.method == "POST" && IsTraceSettingRoute(parts));
  absl::Status s = environment_.auth().Check(head.Header("authorization"),
                                             admin ? TokenAuth::Role::kAdmin : TokenAuth::Role::kInference);
  if (s.ok()) {
    s = admin ? environment_.auth().CheckAdminHost(head.Header("host"))
              : environment_.auth().CheckInferenceHost(head.Header("host"));
  }
  if (!s.ok()) return Error(s);
  return std::nullopt;
}

void OpenInferenceRest::Handle(std::shared_ptr<HttpRequest> request, HttpResponder respond) {
  // Before anything runs: a web page elsewhere must not make a visitor's
  // browser load, unload or infer here.
  if (absl::Status s = CheckSameOrigin(*request); !s.ok()) return respond(Error(s));
  if (absl::Status s = InflateBody(*request); !s.ok()) {
    HttpResponse r = Error(s);
    if (s.code() == absl::StatusCode::kOutOfRange) r.status = 413;
    if (s.code() == absl::StatusCode::kUnimplemented) r.status = 415;
    return respond(std::move(r));
  }
  std::vector<std::string> parts = absl::StrSplit(request->path, '/', absl::SkipEmpty());
  // .../infer: /v2/models/{m}[/versions/{v}]/infer
  if (parts.size() >= 4 && parts[0] == "v2" && parts[1] == "models" && parts.back() == "infer" &&
      (parts.size() == 4 || (parts.size() == 6 && parts[3] == "versions"))) {
    if (request->method != "POST") return respond(WrongMethod(*request, "POST"));
    const std::string version = parts.size() == 6 ? parts[4] : "";
    return Infer(std::move(request), parts[2], version, std::move(respond));
  }
  // /v2/repository/models/{m}/load|unload
  if (parts.size() == 5 && parts[0] == "v2" && parts[1] == "repository" && parts[2] == "models" &&
      (parts[4] == "load" || parts[4] == "unload")) {
    if (request->method != "POST") return respond(WrongMethod(*request, "POST"));
    return Load(*request, parts[3], parts[4] == "load", std::move(respond));
  }
  respond(Route(*request, parts));
}

HttpResponse OpenInferenceRest::Route(const HttpRequest& request, const std::vector<std::string>& parts) {
  if (parts.empty() || parts[0] != "v2") return NoRoute(request);
  const bool get = request.method == "GET";
  // Health needs no token: probes call it.
  if (parts.size() == 3 && parts[1] == "health") {
    if (!get) return WrongMethod(request, "GET");
    if (parts[2] == "live") return Health("live", true);
    if (parts[2] == "ready") return Health("ready", core_.ready() && !environment_.draining());
    return NoRoute(request);
  }
  const absl::string_view authorization = request.Header("authorization");
  if (absl::Status s = environment_.auth().Check(authorization, TokenAuth::Role::kInference); !s.ok()) return Error(s);

  if (parts.size() == 1) {
    if (!get) return WrongMethod(request, "GET");
    inference::ServerMetadataResponse metadata;
    api_.ServerMetadata({"binary_tensor_data"}, &metadata);
    return Ok(metadata);
  }
  if (parts.size() == 3 && parts[1] == "repository" && parts[2] == "index") {
    if (!get && request.method != "POST") return WrongMethod(request, "GET, POST");
    absl::StatusOr<bool> ready_only = ParseRepositoryIndexReady(request.body);
    if (!ready_only.ok()) return Error(ready_only.status());
    inference::RepositoryIndexResponse index;
    if (absl::Status s = api_.RepositoryIndex("", *ready_only, &index); !s.ok()) return Error(s);
    // The protocol's index is a bare array of models.
    std::string json = ProtoToJson(index);
    const std::string prefix = "{\"models\":";
    if (json.rfind(prefix, 0) == 0 && json.size() > prefix.size())
      json = json.substr(prefix.size(), json.size() - prefix.size() - 1);
    return Json(200, std::move(json));
  }
  if (parts.size() >= 2 && (parts[1] == "systemsharedmemory" || parts[1] == "cudasharedmemory")) {
    return SharedMemory(request, parts);
  }
  if (parts.size() == 2 && parts[1] == "logging") {
    if (!get && request.method != "POST") return WrongMethod(request, "GET, POST");
    absl::StatusOr<LogSettings> changes = get ? LogSettings() : ParseLogSettings(request.body);
    if (!changes.ok()) return Error(changes.status());
    if (!changes->empty()) {
      if (absl::Status s = environment_.auth().Check(authorization, TokenAuth::Role::kAdmin); !s.ok()) return Error(s);
    }
    absl::StatusOr<LogSettings> now = ChangeLogSettings(*changes);
    if (!now.ok()) return Error(now.status());
    return Json(200, LogSettingsToJson(*now));
  }
  // /v2/trace/setting, /v2/models/{m}/trace/setting
  if (IsTraceSettingRoute(parts)) {
    if (!get && request.method != "POST") return WrongMethod(request, "GET, POST");
    return TraceSetting(request, parts.size() == 5 ? parts[2] : "", authorization);
  }
  if (parts.size() == 3 && parts[1] == "models" && parts[2] == "stats") {
    if (!get) return WrongMethod(request, "GET");
    inference::ModelStatisticsResponse stats;
    if (absl::Status s = api_.ModelStatistics("", "", &stats); !s.ok()) return Error(s);
    return Ok(stats);
  }
  if (parts.size() < 3 || parts[1] != "models") return NoRoute(request);
  // /v2/models/{m}[/versions/{v}][/ready|config|stats]
  const std::string& model = parts[2];
  std::string version;
  size_t rest = 3;
  if (parts.size() >= 5 && parts[3] == "versions") {
    version = parts[4];
    rest = 5;
  }
  if (parts.size() > rest + 1) return NoRoute(request);
  const std::string action = parts.size() == rest + 1 ? parts[rest] : "";
  if (!get) return WrongMethod(request, "GET");
  if (action.empty()) {
    inference::ModelMetadataResponse metadata;
    if (absl::Status s = api_.ModelMetadata(model, version, &metadata); !s.ok()) return Error(s);
    return Ok(metadata);
  }
  if (action == "ready") return ModelHealth(model, api_.ModelReady(model, version) && !environment_.draining());
  if (action == "config") {
    inference::ModelConfigResponse config;
    if (absl::Status s = api_.ModelConfig(model, version, &config); !s.ok()) return Error(s);
    // The REST form is the configuration itself.
    return Json(200, ProtoToJson(config.config()));
  }
  if (action == "stats") {
    inference::ModelStatisticsResponse stats;
    if (absl::Status s = api_.ModelStatistics(model, version, &stats); !s.ok()) return Error(s);
    return Ok(stats);
  }
  return NoRoute(request);
}

HttpResponse OpenInferenceRest::SharedMemory(const HttpRequest& request, const std::vector<std::string>& parts) {
  // /v2/{system,cuda}sharedmemory[/region/{name}]/{status,register,unregister}
  const SharedMemoryKind kind = parts[1] == "systemsharedmemory" ? SharedMemoryKind::kSystem : SharedMemoryKind::kCuda;
  std::string name;
  std::string action;
  if (parts.size() == 3) {
    action = parts[2];
  } else if (parts.size() == 5 && parts[2] == "region") {
    name = parts[3];
    action = parts[4];
  } else {
    return NoRoute(request);
  }
  if (action == "status") {
    if (request.method != "GET") return WrongMethod(request, "GET");
    absl::Status s = SharedMemoryStatus(kind, name);
    return s.ok() ? Json(200, "[]") : Error(s);
  }
  if (action == "register" && !name.empty()) {
    if (request.method != "POST") return WrongMethod(request, "POST");
    return Error(SharedMemoryRegister(kind, name));
  }
  if (action == "unregister") {
    if (request.method != "POST") return WrongMethod(request, "POST");
    absl::Status s = SharedMemoryUnregister(kind, name);
    return s.ok() ? Json(200, "") : Error(s);
  }
  return NoRoute(request);
}

HttpResponse OpenInferenceRest::TraceSetting(const HttpRequest& request, const std::string& model,
                                             absl::string_view authorization) const {
  TraceSettings* settings = environment_.trace_settings();
  if (absl::Status s = api_.CheckTraceSettingTarget(settings, model); !s.ok()) return Error(s);
  if (request.method != "POST") return Json(200, TraceSettingsToJson(settings->Get(model)));
  absl::StatusOr<TraceSettings::Change> change = ParseTraceSettingBody(request.body);
  if (!change.ok()) return Error(change.status());
  // Reading needs the inference token (the head screen checked it); a
  // change, the admin one.
  if (!change->empty()) {
    if (absl::Status s = environment_.auth().Check(authorization, TokenAuth::Role::kAdmin); !s.ok()) return Error(s);
  }
  absl::StatusOr<TraceSettings::Values> now = settings->Update(model, *change);
  if (!now.ok()) return Error(now.status());
  return Json(200, TraceSettingsToJson(*now));
}

absl::StatusOr<RestInferRequest> OpenInferenceRest::ParseJsonBody(InferCall& call, const HttpRequest& request,
                                                                  std::optional<uint64_t> json_length,
                                                                  const std::string& model,
                                                                  const std::string& version) const {
  // The parse tree lives only while the body is read into tensors, but it
  // is the largest thing the call holds: some tens of bytes per value.
  absl::string_view json_text = request.body;
  if (json_length && *json_length < json_text.size()) json_text = json_text.substr(0, *json_length);
  const JsonScan scan = ScanJson(json_text);
  RETURN_IF_ERROR(CheckScannedJson(scan, "the request body"));
  absl::StatusOr<InflightBudget::Reservation> tree = call.Reserve(scan.TreeBytes());
  if (!tree.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the JSON body's parse tree (about ", scan.TreeBytes(), " bytes for ", scan.values,
                     " values) does not fit the in-flight budget: ", tree.status().message(),
                     "; send tensors in the binary extension instead"));
  }
  // The tree is gone once this returns, and `tree` gives its room back.
  return ParseRestInferRequest(request.body, json_length, model, version, environment_.limits());
}

absl::StatusOr<RestInferRequest> OpenInferenceRest::ParseRawBody(const HttpRequest& request, const std::string& model,
                                                                 const std::string& version) const {
  // The input's name, datatype and shape come from the model's config.
  inference::ModelConfigResponse config;
  RETURN_IF_ERROR(api_.ModelConfig(model, version, &config));
  return ParseRawInferRequest(request.body, config.config(), model, version);
}

void OpenInferenceRest::Infer(std::shared_ptr<HttpRequest> request, const std::string& model,
                              const std::string& version, HttpResponder respond) {
  // What the decoded tensors alias, and the answer's body once encoded,
  // kept until the answer is written.
  struct Exchange {
    RestInferRequest rest;
    RestBody answer;
  };
  auto exchange = std::make_shared<Exchange>();
  std::shared_ptr<InferCall> call = InferCall::Begin(
      environment_, model,
      [exchange, respond = std::move(respond), budget = environment_.budget()](const absl::Status& status) {
        if (!status.ok()) return respond(Error(status));
        HttpResponse r = Json(200, std::move(exchange->answer.body));
        r.held = HoldAnswer(budget, r.body.size());
        if (exchange->answer.json_length) {
          r.content_type = "application/octet-stream";
          r.headers.emplace_back("Inference-Header-Content-Length", absl::StrCat(*exchange->answer.json_length));
        }
        respond(std::move(r));
      });
  if (environment_.tracing()) {
    TraceHttpCall(*call, *request,
                  version.empty() ? "POST /v2/models/{model_name}/infer"
                                  : "POST /v2/models/{model_name}/versions/{model_version}/infer",
                  model);
  }
  if (!call->Admit([&request] { return request->Header("authorization"); }, request->body.size())) return;

  std::optional<uint64_t> json_length;
  if (absl::string_view header = request->Header("inference-header-content-length"); !header.empty()) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(header, &n)) {
      return call->Refuse(absl::InvalidArgumentError(
          absl::StrCat("Inference-Header-Content-Length: '", header.substr(0, 32), "' is not a byte count")));
    }
    json_length = n;
  }
  absl::StatusOr<Clock::time_point> deadline = RestDeadline(*request, call->received());
  if (!deadline.ok()) return call->Refuse(deadline.status());
  absl::StatusOr<RestInferRequest> parsed = json_length == 0u
                                                ? ParseRawBody(*request, model, version)
                                                : ParseJsonBody(*call, *request, json_length, model, version);
  if (!parsed.ok()) return call->Refuse(parsed.status());
  exchange->rest = *std::move(parsed);
  // A client that closes its connection before the answer cancels the call.
  std::shared_ptr<CancelSignal> client_gone = request->client_gone;
  request.reset();  // the body's bytes were copied into the protocol request
  InferenceRequest req;
  req.deadline = *deadline;
  if (absl::Status s = DecodeInferRequest(exchange->rest.request, environment_.limits(), &req); !s.ok()) {
    return call->Refuse(s);
  }
  if (client_gone) {
    client_gone->Subscribe([weak = std::weak_ptr<InferCall>(call)] {
      if (std::shared_ptr<InferCall> gone = weak.lock()) gone->Cancel();
    });
  }
  call->ExpectClasses(MaxClassCount(exchange->rest.request));
  call->Submit(std::move(req), [exchange](InferenceResult& result) {
    inference::ModelInferResponse response;
    absl::Status status = EncodeInferResponse(exchange->rest.request, result, &response);
    if (!status.ok()) return status;
    ASSIGN_OR_RETURN(exchange->answer, WriteRestInferResponse(response, exchange->rest));
    return absl::OkStatus();
  });
}

void OpenInferenceRest::Load(const HttpRequest& request, const std::string& model, bool load, HttpResponder respond) {
  if (absl::Status s = environment_.auth().Check(request.Header("authorization"), TokenAuth::Role::kAdmin); !s.ok()) {
    return respond(Error(s));
  }
  absl::StatusOr<google::protobuf::Map<std::string, inference::ModelRepositoryParameter>> params =
      ParseRepositoryParameters(request.body);
  if (!params.ok()) return respond(Error(params.status()));
  absl::StatusOr<LoadRequest> parsed =
      LoadRequestFromParameters(model, *params, /*unload=*/!load, environment_.limits().max_load_file_bytes,
                                environment_.limits().allow_native_uploads);
  if (!parsed.ok()) return respond(Error(load ? LoadFailure(model, parsed.status()) : parsed.status()));
  if (!load) {
    absl::StatusOr<size_t> n = core_.UnloadModel(*parsed);
    return respond(n.ok() ? Json(200, "") : Error(n.status()));
  }
  // Model files sent with the load count against the in-flight budget until it ends.
  auto held = std::make_shared<InflightBudget::Reservation>();
  if (environment_.budget() && parsed->files) {
    absl::StatusOr<InflightBudget::Reservation> reserved = environment_.budget()->Reserve(request.body.size());
    if (!reserved.ok()) return respond(Error(reserved.status()));
    *held = *std::move(reserved);
  }
  core_.LoadModel(*parsed, [respond = std::move(respond), held, model](absl::StatusOr<LoadResult> result) {
    respond(result.ok() ? Json(200, "") : Error(LoadFailure(model, result.status())));
  });
}

}  // namespace infergate
