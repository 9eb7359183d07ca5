#pragma once
// The Open Inference Protocol's REST API (KServe v2 over HTTP/JSON), served
// on --http-address through the core facade, with the same answers as the
// gRPC front end (both build them with OpenInferenceApi and the shared
// codec), the same tokens (Authorization: Bearer), drain and in-flight
// budget, and the binary tensor data extension:
//   GET  /v2, /v2/health/live, /v2/health/ready
//   GET  /v2/models/{m}[/versions/{v}][/ready|/config|/stats], /v2/models/stats
//   POST /v2/models/{m}[/versions/{v}]/infer (JSON, binary inputs after the
//        JSON, or Triton's raw form: raw_infer_request.h)
//   GET|POST /v2/repository/index; POST /v2/repository/models/{m}/load|unload
//   GET|POST /v2/logging; GET|POST /v2/trace/setting, /v2/models/{m}/trace/setting
//   /v2/{system,cuda}sharedmemory[/region/{name}]/status|register|unregister
// Errors are {"error": "..."} with 400 (bad request), 401/403 (token),
// 404 (unknown model, version or path), 413 (a body that inflates past the
// size limit), 415 (a Content-Encoding other than gzip, deflate or
// identity), 429 (queue or budget full), 503 (draining), 504 (deadline),
// 500 (a model that throws). A compressed body (content_encoding.h) is
// inflated before any route reads it. Answers without a body (health,
// load, unload) carry no content type.
//
// Inference takes the front ends' one call path (infer_call.h): a client
// that closes its connection before the answer cancels its request, and
// the header kDeadlineHeader (http_call.h) sets a deadline.
//
// Threading: Handle is the HttpServer's handler and runs on its threads;
// inference answers are written from the core's completion callback.

#include <memory>
#include <optional>
#include <string>

#include "scheduler/core/inference_core.h"
#include "service/call/call_environment.h"
#include "service/call/http_call.h"
#include "service/call/infer_call.h"
#include "service/http/http_server.h"
#include "service/open_inference/open_inference_api.h"
#include "service/open_inference/open_inference_json.h"

namespace infergate {

class OpenInferenceRest {
 public:
  // Inference goes through `environment`'s call path, the rest through
  // `core`. Neither is owned; both must outlive this.
  OpenInferenceRest(InferenceCore& core, const CallEnvironment& environment, std::string server_version,
                    uint64_t max_body_bytes = uint64_t{64} << 20);

  void Handle(std::shared_ptr<HttpRequest> request, HttpResponder respond);

  // The HTTP server's head screen: before a body is read, refuses a
  // cross-origin browser request and a request without the token its path
  // needs (health: none; model load and unload: admin; the rest of /v2:
  // inference), so an unauthenticated client cannot make the server read
  // and hold a large body.
  std::optional<HttpResponse> Screen(const HttpRequest& head) const;

 private:
  // GET/POST routes other than inference; answers at once.
  HttpResponse Route(const HttpRequest& request, const std::vector<std::string>& parts);
  void Infer(std::shared_ptr<HttpRequest> request, const std::string& model, const std::string& version,
             HttpResponder respond);
  // Triton's trace extension (trace_settings.h) for `model` ("" = global):
  // GET reads, POST changes (with the admin token) and reads.
  HttpResponse TraceSetting(const HttpRequest& request, const std::string& model,
                            absl::string_view authorization) const;
  // An infer request's body as the protocol's request: JSON (and binary
  // inputs after it; its parse tree charged to `call` while it lives), or
  // Triton's raw form when Inference-Header-Content-Length is 0.
  absl::StatusOr<RestInferRequest> ParseJsonBody(InferCall& call, const HttpRequest& request,
                                                 std::optional<uint64_t> json_length, const std::string& model,
                                                 const std::string& version) const;
  absl::StatusOr<RestInferRequest> ParseRawBody(const HttpRequest& request, const std::string& model,
                                                const std::string& version) const;
  void Load(const HttpRequest& request, const std::string& model, bool load, HttpResponder respond);
  // The shared-memory routes (open_inference_extensions.h).
  HttpResponse SharedMemory(const HttpRequest& request, const std::vector<std::string>& parts);
  // Replaces a body sent with a Content-Encoding by what it inflates to.
  absl::Status InflateBody(HttpRequest& request) const;

  InferenceCore& core_;
  const CallEnvironment& environment_;  // /v2/health/ready answers 400 while it drains
  OpenInferenceApi api_;
  uint64_t max_body_bytes_;  // also the most a compressed body may inflate to
};

}  // namespace infergate
