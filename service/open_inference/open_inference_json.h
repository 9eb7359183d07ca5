#pragma once
// The Open Inference Protocol's REST bodies <-> its protobuf messages, so
// the REST front end decodes and answers through the very code the gRPC
// one uses (open_inference_codec.h):
//   - an infer request's JSON (`data` flat or nested) and binary-data
//     extension inputs (`binary_data_size`, bytes after the JSON header of
//     Inference-Header-Content-Length bytes) become raw_input_contents;
//   - the answer's raw outputs become JSON `data`, or binary sections after
//     the JSON where the request asked (`binary_data` per output, or
//     `binary_data_output` for all);
//   - any other answer (metadata, config, statistics, index) renders as
//     JSON with the .proto's field names and 64-bit integers as numbers.
// Pure functions; no LibTorch. Errors are INVALID_ARGUMENT naming the JSON
// field at fault ("inputs[0].data[3]").

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "inference/grpc_service.pb.h"
#include "service/call/wire_tensor.h"
#include "service/open_inference/log_settings.h"
#include "service/tracing/trace_settings.h"

namespace infergate {

struct RestInferRequest {
  inference::ModelInferRequest request;
  bool all_outputs_binary = false;       // the binary_data_output parameter
  std::set<std::string> binary_outputs;  // outputs asking binary_data: true
  std::set<std::string> json_outputs;    // outputs asking binary_data: false
  // Inputs whose `data` was decoded from the text, not the JSON tree
  // (JsonDataDecoding::kDirect); the request is the same either way.
  int inputs_decoded_from_text = 0;
};

// How an infer request's `data` arrays are decoded: kDirect, the numeric
// ones straight from the text (numeric_json_data.h: the same answers, a
// tenth of the time) and the rest through the JSON tree; kTree, every one
// through the tree (the fuzzer and the tests compare the two).
enum class JsonDataDecoding { kDirect, kTree };

// Parses `body` for `model` and `version` ("" = latest). `json_length` is
// the Inference-Header-Content-Length header: the JSON's size when binary
// input data follows it; nullopt when the whole body is JSON.
absl::StatusOr<RestInferRequest> ParseRestInferRequest(absl::string_view body, std::optional<uint64_t> json_length,
                                                       const std::string& model, const std::string& version,
                                                       const CodecLimits& limits,
                                                       JsonDataDecoding decoding = JsonDataDecoding::kDirect);

struct RestBody {
  std::string body;
  // The JSON's length when binary output data follows it (the
  // Inference-Header-Content-Length to send); nullopt for all-JSON bodies.
  std::optional<uint64_t> json_length;
};

// The REST answer for `response` (raw outputs, as EncodeInferResponse
// writes them) to `request`.
absl::StatusOr<RestBody> WriteRestInferResponse(const inference::ModelInferResponse& response,
                                                const RestInferRequest& request);

// `message` as the REST API renders it: field names as in the .proto,
// scalars always present, 64-bit integers as numbers, enums by name.
std::string ProtoToJson(const google::protobuf::Message& message);

// A repository load/unload body: {"parameters": {"device": "cpu", ...}}
// (empty body allowed). Values may be strings, integers or booleans.
absl::StatusOr<google::protobuf::Map<std::string, inference::ModelRepositoryParameter>> ParseRepositoryParameters(
    absl::string_view body);

// The `ready` flag of a repository index body ({"ready": true}); false for
// an empty body.
absl::StatusOr<bool> ParseRepositoryIndexReady(absl::string_view body);

// A /v2/logging body: {"log_info": true, "log_verbose_level": 1, ...}
// (empty: nothing to change). Booleans, unsigned integers and strings.
absl::StatusOr<LogSettings> ParseLogSettings(absl::string_view body);
std::string LogSettingsToJson(const LogSettings& settings);

// A /v2/trace/setting body: {"trace_rate": "10", "trace_level": ["OFF"],
// "trace_count": null, ...}, each value a string, an array of strings, or
// null (clear a model's own value). Empty: nothing to change.
absl::StatusOr<TraceSettings::Change> ParseTraceSettingBody(absl::string_view body);
// The settings as Triton answers them: trace_level an array, the others
// strings.
std::string TraceSettingsToJson(const TraceSettings::Values& settings);

// {"error": message}, escaped.
std::string JsonError(absl::string_view message);

}  // namespace infergate
