#include "scheduler/repository/aoti_signature.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "scheduler/repository/aoti_package.h"
#include "scheduler/repository/model_config.h"
#include "scheduler/repository/repository_scan.h"

namespace infergate {
namespace {

std::string SpecDimsText(const v1::TensorSpec& t) { return absl::StrCat("[", absl::StrJoin(t.dims(), ", "), "]"); }

// OK when `config`'s tensors agree with the package's; otherwise
// FAILED_PRECONDITION naming the first difference (the field is
// "<list>[i]...").
absl::Status CheckTensors(const google::protobuf::RepeatedPtrField<v1::TensorSpec>& config,
                          const google::protobuf::RepeatedPtrField<v1::TensorSpec>& package, absl::string_view list) {
  auto differ = [&](const std::string& field, const std::string& ours, const std::string& theirs) {
    return absl::FailedPreconditionError(
        absl::StrCat("config.pbtxt ", field, " is ", ours, " but the package was exported with ", theirs));
  };
  if (config.size() != package.size()) {
    return differ(std::string(list), absl::StrCat(config.size(), " tensor(s)"), absl::StrCat(package.size()));
  }
  for (int i = 0; i < config.size(); ++i) {
    const v1::TensorSpec& ours = config[i];
    const v1::TensorSpec& theirs = package[i];
    const std::string field = absl::StrCat(list, "[", i, "]");
    if (ours.name() != theirs.name()) {
      return differ(field + ".name", absl::StrCat("'", ours.name(), "'"), absl::StrCat("'", theirs.name(), "'"));
    }
    if (ours.dtype() != theirs.dtype()) {
      return differ(field + ".dtype", v1::DataType_Name(ours.dtype()), v1::DataType_Name(theirs.dtype()));
    }
    bool same_dims = ours.dims_size() == theirs.dims_size();
    for (int d = 0; same_dims && d < ours.dims_size(); ++d) {
      same_dims = theirs.dims(d) == -1 || ours.dims(d) == theirs.dims(d);
    }
    if (!same_dims) return differ(field + ".dims", SpecDimsText(ours), SpecDimsText(theirs));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<v1::ModelConfig>> PackageSignature(const std::vector<AotiVariant>& variants,
                                                                const std::string& model) {
  const AotiVariant* first = nullptr;
  for (const AotiVariant& v : variants) {
    if (v.signature.empty()) continue;
    if (!first) {
      first = &v;
    } else if (v.signature != first->signature) {
      return absl::InvalidArgumentError(absl::StrCat("the package's variants '", first->name, "' and '", v.name,
                                                     "' declare different ", kAotiSignatureKey, " metadata"));
    }
  }
  if (!first) return std::nullopt;
  absl::StatusOr<v1::ModelConfig> parsed = ParseModelConfig(first->signature, model, ConfigNaming::kServedAs);
  auto invalid = [&](absl::string_view why) {
    absl::string_view message = why;
    absl::ConsumePrefix(&message, "config.pbtxt: ");
    return absl::InvalidArgumentError(
        absl::StrCat("the package's ", kAotiSignatureKey, " metadata (variant '", first->name, "'): ", message));
  };
  if (!parsed.ok()) return invalid(parsed.status().message());
  parsed->clear_triton_config_text();  // set when the text is in Triton's schema
  v1::ModelConfig signature_only;
  signature_only.set_name(parsed->name());
  signature_only.set_max_batch_size(parsed->max_batch_size());
  *signature_only.mutable_inputs() = parsed->inputs();
  *signature_only.mutable_outputs() = parsed->outputs();
  if (signature_only.SerializeAsString() != parsed->SerializeAsString()) {
    return invalid("may only hold max_batch_size, inputs and outputs");
  }
  if (parsed->inputs_size() == 0) return invalid("declares no inputs");
  return signature_only;
}

v1::ModelConfig CompleteConfigFromPackage(v1::ModelConfig config, const v1::ModelConfig& signature) {
  if (config.inputs_size() == 0) {
    *config.mutable_inputs() = signature.inputs();
    config.set_max_batch_size(signature.max_batch_size());
  }
  if (config.outputs_size() == 0) *config.mutable_outputs() = signature.outputs();
  return config;
}

absl::Status CheckConfigAgainstPackage(const v1::ModelConfig& config, const v1::ModelConfig& signature) {
  const uint32_t ours = config.max_batch_size();
  const uint32_t exported = signature.max_batch_size();
  if (exported == 0 && ours != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "config.pbtxt max_batch_size is ", ours,
        " but the package was exported without a batch dimension (max_batch_size 0); set 0, or export with one"));
  }
  if (exported != 0 && ours == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("config.pbtxt max_batch_size is 0 but the package was exported with a batch dimension of up to ",
                     exported, "; set max_batch_size to at most ", exported));
  }
  if (ours > exported) {
    return absl::FailedPreconditionError(absl::StrCat(
        "config.pbtxt max_batch_size is ", ours, ", above the batch maximum the package was exported with (", exported,
        "); set at most ", exported, ", or export a larger one"));
  }
  RETURN_IF_ERROR(CheckTensors(config.inputs(), signature.inputs(), "inputs"));
  if (config.outputs_size() != 0 && signature.outputs_size() != 0) {
    return CheckTensors(config.outputs(), signature.outputs(), "outputs");
  }
  return absl::OkStatus();
}

absl::StatusOr<InputSignature> CheckConfigForCompiledPackage(const v1::ModelConfig& config,
                                                             const std::vector<AotiVariant>& variants,
                                                             const AotiVariant& variant) {
  if (!variant.weights_outside.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "variant '", variant.name, "' keeps its weights outside its compiled library (",
        variant.weights_outside.substr(0, 128),
        "), which this server does not load: compile the package with the weights in the library (PyTorch's "
        "default)"));
  }
  ASSIGN_OR_RETURN(const std::optional<v1::ModelConfig> exported, PackageSignature(variants, config.name()));
  if (exported) RETURN_IF_ERROR(CheckConfigAgainstPackage(config, *exported));
  if (config.inputs_size() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("config.pbtxt must declare the inputs of a compiled package that does not carry them in its ",
                     kAotiSignatureKey, " metadata (it names none)"));
  }
  InputSignature signature = DeclaredSignature(config);
  for (size_t i = 0; i < signature.inputs.size(); ++i) {
    const InputSpec& in = signature.inputs[i];
    if (!in.dtype || !in.dims) {
      return absl::FailedPreconditionError(absl::StrCat("inputs[", i, "]: a compiled package needs dtype and dims"));
    }
    if (*in.dtype == DType::kBytes) {
      return absl::FailedPreconditionError(
          absl::StrCat("inputs[", i,
                       "]: a compiled package takes tensors only, not TYPE_STRING; serve a string model as "
                       "TorchScript"));
    }
    for (size_t d = 0; d < in.dims->size(); ++d) {
      if ((*in.dims)[d] < 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "inputs[", i, "].dims[", d, "]: must be fixed for a compiled package (only the batch dimension may vary)"));
      }
    }
  }
  for (int i = 0; i < config.outputs_size(); ++i) {
    if (config.outputs(i).dtype() == v1::BYTES) {
      return absl::FailedPreconditionError(
          absl::StrCat("outputs[", i,
                       "]: a compiled package returns tensors only, not TYPE_STRING; serve a string model as "
                       "TorchScript"));
    }
  }
  return signature;
}

std::string NewestPackageIn(const std::string& dir) {
  absl::StatusOr<DiskModel> disk = ScanModelFolder(dir, "");
  if (!disk.ok()) return "";
  for (auto it = disk->versions.rbegin(); it != disk->versions.rend(); ++it) {
    if (it->second.package) return VersionModelFile(absl::StrCat(dir, "/", it->first));
  }
  return "";
}

}  // namespace infergate
