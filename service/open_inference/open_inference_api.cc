#include "service/open_inference/open_inference_api.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/client_text.h"
#include "common/status_macros.h"
#include "proto/proto_enums.h"
#include "scheduler/repository/model_upload.h"
#include "service/open_inference/open_inference_codec.h"
#include "service/open_inference/triton_model_config.h"

namespace infergate {
namespace {

constexpr char kPlatform[] = "pytorch_libtorch";
constexpr char kAotiPlatform[] = "torch_aoti";

// Triton's platform name for what serves `version` (empty: the latest
// served): an AOTInductor package or TorchScript.
const char* PlatformOf(const ModelStatus& model, const std::string& version) {
  int64_t v = 0;
  if (version.empty()) {
    if (model.versions.empty()) return kPlatform;
    v = model.versions.back();
  } else if (!absl::SimpleAtoi(version, &v)) {
    return kPlatform;
  }
  for (const VersionStatus& s : model.states) {
    if (s.version == v) return s.stamp.package ? kAotiPlatform : kPlatform;
  }
  return kPlatform;
}

// The model's declared datatype for a config tensor; "" when it declares none.
std::string DeclaredDatatype(int wire) {
  std::optional<DType> dtype = DTypeFromProto(wire);
  return dtype ? std::string(DatatypeName(*dtype)) : std::string();
}

void FillTensorMetadata(const v1::TensorSpec& spec, bool batched,
                        inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(spec.name());
  out->set_datatype(DeclaredDatatype(spec.dtype()));
  if (batched) out->add_shape(-1);
  for (int64_t d : spec.dims()) out->add_shape(d);
}

// A repository parameter as text (string or integer), "" when absent.
absl::StatusOr<std::string> RepositoryParameter(
    const google::protobuf::Map<std::string, inference::ModelRepositoryParameter>& params, const std::string& key) {
  auto it = params.find(key);
  if (it == params.end()) return std::string();
  switch (it->second.parameter_choice_case()) {
    case inference::ModelRepositoryParameter::kStringParam: return it->second.string_param();
    case inference::ModelRepositoryParameter::kInt64Param: return absl::StrCat(it->second.int64_param());
    default: return absl::InvalidArgumentError(absl::StrCat("parameters.", key, ": expected a string"));
  }
}

absl::StatusOr<Precision> PrecisionParameter(const std::string& text) {
  if (std::optional<Precision> p = ParsePrecisionName(text)) return *p;
  return absl::InvalidArgumentError(
      absl::StrCat("parameters.precision: '", text.substr(0, 32), "'; expected AUTO, FP32, FP16 or BF16"));
}

void FillDuration(const DurationStat& from, inference::StatisticDuration* to) {
  to->set_count(from.count);
  to->set_ns(from.ns);
}

}  // namespace

OpenInferenceApi::OpenInferenceApi(InferenceCore& core, std::string server_version)
    : core_(core), server_version_(std::move(server_version)) {}

void OpenInferenceApi::ServerMetadata(const std::vector<std::string>& extra_extensions,
                                      inference::ServerMetadataResponse* out) const {
  out->set_name("infergate");
  out->set_version(server_version_);
  // Only what is implemented: clients switch features on from this list.
  for (const char* extension :
       {"model_repository", "model_configuration", "statistics", "parameters", "classification", "logging", "trace"}) {
    out->add_extensions(extension);
  }
  for (const std::string& extension : extra_extensions) out->add_extensions(extension);
}

bool OpenInferenceApi::ModelReady(const std::string& name, const std::string& version) const {
  absl::StatusOr<ModelStatus> model = core_.Model(name, version);
  return model.ok() && model->problem.ok() && !model->versions.empty();
}

namespace {

// The accuracy checks of the version asked for (or the latest served), as
// "accuracy:<device>:<dtype>" -> "<state>: <detail>".
std::vector<std::pair<std::string, std::string>> AccuracyParameters(const ModelStatus& model,
                                                                    const std::string& version) {
  int64_t wanted = model.versions.empty() ? 0 : model.versions.back();
  if (!version.empty()) (void)absl::SimpleAtoi(version, &wanted);
  std::vector<std::pair<std::string, std::string>> out;
  for (const PrecisionReport& r : model.precision) {
    if (r.version != wanted) continue;
    std::string value = r.state;
    if (!r.detail.empty()) absl::StrAppend(&value, ": ", r.detail);
    out.emplace_back(absl::StrCat("accuracy:", r.device, ":", absl::AsciiStrToLower(DTypeName(r.dtype))),
                     std::move(value));
  }
  return out;
}

}  // namespace

absl::Status OpenInferenceApi::ModelMetadata(const std::string& name, const std::string& version,
                                             inference::ModelMetadataResponse* out) const {
  ASSIGN_OR_RETURN(ModelStatus model, core_.Model(name, version));
  out->set_name(model.name);
  if (version.empty()) {
    for (int64_t v : model.versions) out->add_versions(absl::StrCat(v));
  } else {
    out->add_versions(version);
  }
  out->set_platform(PlatformOf(model, version));
  const bool batched = model.config.max_batch_size() > 0;
  for (const v1::TensorSpec& in : model.config.inputs()) FillTensorMetadata(in, batched, out->add_inputs());
  for (const v1::TensorSpec& o : model.config.outputs()) FillTensorMetadata(o, batched, out->add_outputs());
  for (auto& [key, value] : AccuracyParameters(model, version)) {
    (*out->mutable_parameters())[key].set_string_param(std::move(value));
  }
  return absl::OkStatus();
}

absl::Status OpenInferenceApi::CheckTraceSettingTarget(const TraceSettings* settings, const std::string& model) const {
  if (settings == nullptr) return absl::UnimplementedError("this server does not serve trace settings");
  if (!model.empty() && !core_.KnownModel(model)) {
    return absl::NotFoundError(absl::StrCat("Request for unknown model : '", model.substr(0, 64), "'"));
  }
  return absl::OkStatus();
}

absl::Status OpenInferenceApi::ModelConfig(const std::string& name, const std::string& version,
                                           inference::ModelConfigResponse* out) const {
  absl::StatusOr<ModelStatus> model = core_.Model(name, version);
  if (!model.ok()) return model.status();
  const v1::ModelConfig& from = model->config;
  inference::ModelConfig* config = out->mutable_config();
  if (!from.triton_config_text().empty() && ReadTritonFields(from.triton_config_text(), config)) {
    // Triton's own fields, as written; the name it is served under.
    config->set_name(model->name);
    for (auto& [key, value] : AccuracyParameters(*model, version)) {
      (*config->mutable_parameters())[key].set_string_value(std::move(value));
    }
    return absl::OkStatus();
  }
  config->Clear();
  config->set_name(model->name);
  config->set_platform(PlatformOf(*model, version));
  config->set_backend("pytorch");
  for (auto& [key, value] : AccuracyParameters(*model, version)) {
    (*config->mutable_parameters())[key].set_string_value(std::move(value));
  }
  config->set_max_batch_size(static_cast<int32_t>(from.max_batch_size()));
  for (const v1::TensorSpec& s : from.inputs()) {
    inference::ModelInput* in = config->add_input();
    in->set_name(s.name());
    if (std::optional<DType> d = DTypeFromProto(s.dtype())) in->set_data_type(ConfigDatatype(*d));
    for (int64_t d : s.dims()) in->add_dims(d);
  }
  for (const v1::TensorSpec& s : from.outputs()) {
    inference::ModelOutput* o = config->add_output();
    o->set_name(s.name());
    if (std::optional<DType> d = DTypeFromProto(s.dtype())) o->set_data_type(ConfigDatatype(*d));
    for (int64_t d : s.dims()) o->add_dims(d);
    o->set_label_filename(s.label_filename());
  }
  if (from.max_batch_size() > 0) {
    inference::ModelDynamicBatching* batching = config->mutable_dynamic_batching();
    batching->set_max_queue_delay_microseconds(from.dynamic_batching().max_queue_delay_us());
    for (uint32_t size : from.dynamic_batching().preferred_batch_sizes()) {
      batching->add_preferred_batch_size(static_cast<int32_t>(size));
    }
  }
  // One instance group per device kind the model may run on here, sized by
  // the batches of it that may run at once: on a GPU its own
  // accelerator_instances, else the GPU's workers; on the CPU its workers.
  int cpu_workers = 0;
  int gpu_workers = 1;  // per GPU: --accelerator-workers
  std::vector<int32_t> gpus;
  for (const DeviceStatus& d : core_.Devices()) {
    if (!d.info.available || !model->AllowsDevice(d.info.id)) continue;
    if (d.info.id.kind == DeviceKind::kCpu) cpu_workers += d.workers;
    if (d.info.id.kind == DeviceKind::kCuda) {
      gpus.push_back(d.info.id.index);
      gpu_workers = d.workers;
    }
  }
  if (!gpus.empty()) {
    inference::ModelInstanceGroup* group = config->add_instance_group();
    group->set_name(absl::StrCat(model->name, "_gpu"));
    group->set_kind(inference::ModelInstanceGroup::KIND_GPU);
    group->set_count(from.accelerator_instances() > 0 ? static_cast<int32_t>(from.accelerator_instances())
                                                      : gpu_workers);
    for (int32_t g : gpus) group->add_gpus(g);
  }
  if (cpu_workers > 0) {
    inference::ModelInstanceGroup* group = config->add_instance_group();
    group->set_name(absl::StrCat(model->name, "_cpu"));
    group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
    group->set_count(cpu_workers);
  }
  return absl::OkStatus();
}

absl::Status OpenInferenceApi::ModelStatistics(const std::string& name, const std::string& version,
                                               inference::ModelStatisticsResponse* out) const {
  ASSIGN_OR_RETURN(std::vector<ModelStats> stats, core_.Statistics(name, version));
  for (const ModelStats& s : stats) {
    inference::ModelStatistics* m = out->add_model_stats();
    m->set_name(s.model);
    m->set_version(absl::StrCat(s.version));
    m->set_last_inference(s.last_inference_ms);
    m->set_inference_count(s.inference_count);
    m->set_execution_count(s.execution_count);
    inference::InferStatistics* infer = m->mutable_inference_stats();
    FillDuration(s.success, infer->mutable_success());
    FillDuration(s.fail, infer->mutable_fail());
    FillDuration(s.queue, infer->mutable_queue());
    FillDuration(s.compute_input, infer->mutable_compute_input());
    FillDuration(s.compute_infer, infer->mutable_compute_infer());
    FillDuration(s.compute_output, infer->mutable_compute_output());
    for (const auto& [size, batch] : s.batches) {
      inference::InferBatchStatistics* b = m->add_batch_stats();
      b->set_batch_size(size);
      FillDuration(batch.compute_input, b->mutable_compute_input());
      FillDuration(batch.compute_infer, b->mutable_compute_infer());
      FillDuration(batch.compute_output, b->mutable_compute_output());
    }
  }
  return absl::OkStatus();
}

absl::Status OpenInferenceApi::RepositoryIndex(const std::string& repository, bool ready_only,
                                               inference::RepositoryIndexResponse* out) const {
  if (!repository.empty()) {
    return absl::NotFoundError(
        absl::StrCat("repository_name: '", repository.substr(0, 64), "' is not a repository; leave it empty"));
  }
  ASSIGN_OR_RETURN(std::vector<ModelStatus> models, core_.Models());
  for (const ModelStatus& m : models) {
    auto add = [&](const std::string& version, absl::string_view state, absl::string_view reason) {
      inference::RepositoryIndexResponse::ModelIndex* index = out->add_models();
      index->set_name(m.name);
      index->set_version(version);
      index->set_state(std::string(state));
      index->set_reason(ForClients(reason));
    };
    if (!m.problem.ok() && m.states.empty()) {
      if (!ready_only) add("", "UNAVAILABLE", m.problem.message());
      continue;
    }
    for (const VersionStatus& v : m.states) {
      const bool ready = v.state == VersionState::kReady && m.problem.ok();
      if (ready_only && !ready) continue;
      std::string reason = v.reason;
      if (!m.problem.ok()) reason = std::string(m.problem.message());
      if (ready && !m.config_problem.empty())
        reason = reason.empty() ? m.config_problem : reason + "; " + m.config_problem;
      absl::string_view state = VersionStateName(v.state);
      if (v.state == VersionState::kReady && !ready) state = "UNAVAILABLE";
      add(absl::StrCat(v.version), state, reason);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadRequest> LoadRequestFromParameters(
    const std::string& model, const google::protobuf::Map<std::string, inference::ModelRepositoryParameter>& params,
    bool unload, uint64_t max_file_bytes, bool allow_native) {
  LoadRequest load;
  load.model = model;
  std::map<std::string, std::string> files;
  uint64_t file_bytes = 0;
  size_t file_count = 0;
  for (const auto& [key, value] : params) {
    if (key == "version" || key == "device" || key == "precision") continue;  // read below
    if (!unload && key == "config") {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kStringParam) {
        return absl::InvalidArgumentError("parameters.config: expected a string holding a JSON model configuration");
      }
      absl::StatusOr<ConfigOverride> patch = ConfigOverrideFromTritonJson(value.string_param(), model);
      if (!patch.ok()) return patch.status();
      load.config_override = std::make_shared<const ConfigOverride>(*std::move(patch));
      continue;
    }
    if (unload && key == "unload_dependents") {
      // Nothing here depends on another model (there are no ensembles).
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kBoolParam) {
        return absl::InvalidArgumentError("parameters.unload_dependents: expected a bool");
      }
      continue;
    }
    if (!unload && key.rfind("file:", 0) == 0) {
      const std::string field = absl::StrCat("parameters.", key.substr(0, 128));
      // Triton's words for files it cannot take, then which and why.
      auto refused = [&](absl::StatusCode code, absl::string_view why) {
        return absl::Status(code, absl::StrCat("failed to poll from model repository: ", field, ": ", why));
      };
      const std::string path = key.substr(5);
      if (absl::Status s = CheckUploadPath(path); !s.ok())
        return refused(absl::StatusCode::kInvalidArgument, s.message());
      if (max_file_bytes == 0) {
        return refused(absl::StatusCode::kFailedPrecondition,
                       "this server takes no model files sent with a load (uploads are off unless "
                       "--max-load-file-bytes is set); put the model in the repository (--model-repository) and "
                       "load it by name");
      }
      std::string content;
      if (value.parameter_choice_case() == inference::ModelRepositoryParameter::kBytesParam) {
        content = value.bytes_param();
      } else if (value.parameter_choice_case() == inference::ModelRepositoryParameter::kStringParam) {
        // REST carries a file's bytes in base64 (Triton's HTTP client does).
        if (!absl::Base64Unescape(value.string_param(), &content)) {
          return absl::InvalidArgumentError(absl::StrCat(field, ": expected the file's bytes in base64"));
        }
      } else {
        return absl::InvalidArgumentError(absl::StrCat(field, ": expected the file's bytes"));
      }
      file_bytes += content.size();
      if (file_bytes > max_file_bytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat(field, ": the files sent with this load hold more than --max-load-file-bytes (",
                         max_file_bytes, " bytes)"));
      }
      if (!allow_native) {
        RETURN_IF_ERROR(CheckNotNativeCode(path, content));
      }
      if (++file_count > kMaxUploadFiles) {
        return absl::InvalidArgumentError(absl::StrCat(field, ": a load carries at most ", kMaxUploadFiles, " files"));
      }
      files[path] = std::move(content);
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "parameters.", key.substr(0, 64), ": not a", unload ? "n unload" : " load", " parameter (",
        unload ? "version, device, precision, unload_dependents" : "version, device, precision, config, file:<path>",
        ")"));
  }
  if (!files.empty()) {
    // Triton's rule: files come with the configuration they are served under.
    if (!load.config_override) {
      return absl::InvalidArgumentError(
          "parameters.config: required with file: parameters (the model configuration the files are served under; "
          "\"{}\" takes what the files themselves declare)");
    }
    bool has_model = false;
    for (const auto& [path, content] : files) has_model |= IsVersionModelFile(path);
    if (!has_model) {
      return absl::InvalidArgumentError(
          "parameters.file:<version>/model.pt: the files sent with the load hold no model (a <version>/model.pt, or "
          "<version>/model.pt2 where native uploads are allowed)");
    }
    load.files = std::make_shared<const std::map<std::string, std::string>>(std::move(files));
  }
  ASSIGN_OR_RETURN(std::string version, RepositoryParameter(params, "version"));
  load.version = version;
  ASSIGN_OR_RETURN(std::string device, RepositoryParameter(params, "device"));
  load.device = device;
  ASSIGN_OR_RETURN(std::string precision, RepositoryParameter(params, "precision"));
  ASSIGN_OR_RETURN(Precision p, PrecisionParameter(precision));
  load.precision = p;
  return load;
}

absl::Status LoadFailure(const std::string& model, const absl::Status& failed) {
  // A mode that takes no loads refused it: Triton's words start the message.
  if (failed.ok() || absl::StartsWith(failed.message(), InferenceCore::kModelControlRefusal)) return failed;
  return absl::Status(failed.code(), absl::StrCat("failed to load '", model.substr(0, 64), "': ", failed.message()));
}

}  // namespace infergate
