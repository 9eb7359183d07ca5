#pragma once
// What a front end says about an inference call when its trace begins
// (Tracing::StartCall): the transport, the RPC or route, and the model as
// the caller named it. No tracing library here, so every front end can
// include it.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "scheduler/model/inference_types.h"

namespace infergate {

enum class CallTransport { kGrpc, kHttp };

struct CallTraceStart {
  CallTransport transport = CallTransport::kGrpc;
  // The server span's name: "<rpc_service>/<rpc_method>", or "POST <route>"
  // (a constant, so an unsampled call builds no string).
  absl::string_view span_name;
  // gRPC: the full service name ("inference.GRPCInferenceService") and the
  // method ("ModelInfer").
  absl::string_view rpc_service;
  absl::string_view rpc_method;
  // HTTP: the route template ("/v2/models/{model_name}/infer") and the path.
  absl::string_view http_route;
  absl::string_view url_path;
  // HTTP: the response status for a call's status (the REST front end's
  // table), for http.response.status_code.
  int (*http_status_for)(const absl::Status& status) = nullptr;
  absl::string_view model;
  Clock::time_point received;
};

}  // namespace infergate
