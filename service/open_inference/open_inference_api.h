#pragma once
// The Open Inference Protocol's answers, built from the core facade: what
// the gRPC front end (open_inference_service.h) and the REST one
// (open_inference_rest.h) both serve, so the two cannot drift apart. Each
// answer is the protocol's own message; the REST front end renders it as
// JSON. Callers check the caller's token first: nothing here authenticates.
//
// Threading: every method may be called from any thread at once; `core`
// is not owned and must outlive this.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inference/grpc_service.pb.h"
#include "scheduler/core/inference_core.h"

namespace infergate {

class TraceSettings;

class OpenInferenceApi {
 public:
  OpenInferenceApi(InferenceCore& core, std::string server_version);

  InferenceCore& core() const { return core_; }

  // Name, version and the extensions served; `extra_extensions` are those
  // only one transport has (REST: "binary_tensor_data").
  void ServerMetadata(const std::vector<std::string>& extra_extensions, inference::ServerMetadataResponse* out) const;
  // Whether the model (version "" = any) can serve now; false, not an
  // error, for an unknown model.
  bool ModelReady(const std::string& name, const std::string& version) const;
  // NOT_FOUND naming the model or version for what the repository lacks.
  absl::Status ModelMetadata(const std::string& name, const std::string& version,
                             inference::ModelMetadataResponse* out) const;
  absl::Status ModelConfig(const std::string& name, const std::string& version,
                           inference::ModelConfigResponse* out) const;
  // Every model's statistics when `name` is empty.
  absl::Status ModelStatistics(const std::string& name, const std::string& version,
                               inference::ModelStatisticsResponse* out) const;
  // Triton's trace extension: whether `model`'s trace settings ("" = the
  // global ones) can be read or changed: UNIMPLEMENTED without `settings`,
  // NOT_FOUND (Triton's words) for a model the repository lacks.
  absl::Status CheckTraceSettingTarget(const TraceSettings* settings, const std::string& model) const;
  // `repository` must be empty (infergate serves one repository).
  absl::Status RepositoryIndex(const std::string& repository, bool ready_only,
                               inference::RepositoryIndexResponse* out) const;

 private:
  InferenceCore& core_;
  std::string server_version_;
};

// A repository load or unload request's parameters for `model`: `version`,
// `device`, `precision` (strings or integers); a load's `config` (Triton's
// JSON model configuration, triton_model_config.h); an unload's
// `unload_dependents`; a load's `file:<path>` parameters, the model's files
// (bytes over gRPC, base64 over REST) at most `max_file_bytes` in all (0:
// refused), with `config` required beside them as Triton does; a file
// that is native code (CheckNotNativeCode) PERMISSION_DENIED unless
// `allow_native`. Any other parameter is INVALID_ARGUMENT naming it.
absl::StatusOr<LoadRequest> LoadRequestFromParameters(
    const std::string& model, const google::protobuf::Map<std::string, inference::ModelRepositoryParameter>& params,
    bool unload, uint64_t max_file_bytes = 0, bool allow_native = false);

// A repository load that failed, in Triton's words first ("failed to load
// 'x': ..." ; clients match on them), with the same code.
absl::Status LoadFailure(const std::string& model, const absl::Status& failed);

}  // namespace infergate
