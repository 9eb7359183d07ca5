#include "scheduler/model/check_inputs.h"

#include <torch/serialize.h>
#include <torch/torch.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_digest.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "devices/torch_dtype.h"
#include "scheduler/model/torch_status.h"
#include "scheduler/model/warmup_samples.h"

namespace infergate {
namespace {

constexpr int64_t kVariableDim = 8;
// A sample-input file is read whole; more than this is not a sample.
constexpr uint64_t kMaxSampleBytes = 256ull << 20;

const v1::InputRange* RangeOf(const v1::AccuracyConfig& config, const std::string& input) {
  for (const v1::InputRange& r : config.inputs()) {
    if (r.name() == input) return &r;
  }
  return nullptr;
}

absl::StatusOr<CheckInputs> FromSampleFile(const InputSignature& signature, const v1::AccuracyConfig& config,
                                           const std::vector<std::string>& folders) {
  const std::string& name = config.sample_inputs();
  if (name.find('/') != std::string::npos || name == "." || name == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("accuracy.sample_inputs: '", name, "' must be a file name in the model or version folder"));
  }
  std::string path;
  for (const std::string& folder : folders) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(std::filesystem::path(folder) / name, ec)) {
      path = (std::filesystem::path(folder) / name).string();
      break;
    }
  }
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("accuracy.sample_inputs: '", name, "' is not in the model folder or its version folder"));
  }
  std::error_code ec;
  if (std::filesystem::file_size(path, ec) > kMaxSampleBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("accuracy.sample_inputs: ", path, " is larger than ", kMaxSampleBytes >> 20, " MiB"));
  }
  absl::StatusOr<std::string> bytes = ReadFile(path, "accuracy.sample_inputs");
  if (!bytes.ok()) return absl::InvalidArgumentError(bytes.status().message());
  ASSIGN_OR_RETURN(std::string digest, Sha256OfFile(path, "accuracy.sample_inputs"));

  c10::IValue loaded;
  try {
    loaded = torch::pickle_load(std::vector<char>(bytes->begin(), bytes->end()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("accuracy.sample_inputs: ", path,
                                                   " is not a file torch.save wrote: ", ConciseTorchMessage(e.what())));
  }
  CheckInputs out;
  out.fingerprint = absl::StrCat("sample:", digest);
  auto take = [&](const c10::IValue& v, const std::string& input) -> absl::Status {
    if (!v.isTensor()) {
      return absl::InvalidArgumentError(
          absl::StrCat("accuracy.sample_inputs: ", path, ": input '", input, "' is not a tensor"));
    }
    out.tensors.push_back(v.toTensor().contiguous());
    return absl::OkStatus();
  };
  if (loaded.isGenericDict()) {
    c10::Dict<c10::IValue, c10::IValue> dict = loaded.toGenericDict();
    for (const InputSpec& spec : signature.inputs) {
      auto it = dict.find(c10::IValue(spec.name));
      if (it == dict.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("accuracy.sample_inputs: ", path, " has no tensor for input '", spec.name, "'"));
      }
      RETURN_IF_ERROR(take(it->value(), spec.name));
    }
  } else if (loaded.isTensor() && signature.inputs.size() <= 1) {
    RETURN_IF_ERROR(take(loaded, signature.inputs.empty() ? "0" : signature.inputs[0].name));
  } else if (loaded.isTuple() || loaded.isList()) {
    std::vector<c10::IValue> items = loaded.isTuple() ? loaded.toTupleRef().elements().vec() : loaded.toListRef().vec();
    if (!signature.inputs.empty() && items.size() != signature.inputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("accuracy.sample_inputs: ", path, " holds ", items.size(),
                                                     " tensors; the model takes ", signature.inputs.size()));
    }
    for (size_t i = 0; i < items.size(); ++i) {
      RETURN_IF_ERROR(take(items[i], absl::StrCat(i)));
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("accuracy.sample_inputs: ", path, " holds a ", loaded.tagKind(),
                     "; save a dict of input name to tensor, a list of tensors or one tensor"));
  }
  return out;
}

}  // namespace

bool UsesWarmupSample(const v1::ModelConfig& config) {
  if (config.warmup_samples_size() == 0) return false;
  for (const v1::WarmupInput& input : config.warmup_samples(0).inputs()) {
    if (input.dtype() == v1::BYTES) return false;
  }
  return true;
}

absl::StatusOr<CheckInputs> MakeCheckInputs(const InputSignature& signature, const v1::ModelConfig& model_config,
                                            const std::vector<std::string>& folders) {
  const v1::AccuracyConfig& config = model_config.accuracy();
  if (!config.sample_inputs().empty()) return FromSampleFile(signature, config, folders);
  if (UsesWarmupSample(model_config) && !folders.empty()) {
    ASSIGN_OR_RETURN(WarmupTensors sample,
                     MakeWarmupTensors(signature, model_config.warmup_samples(0), 0, folders.back()));
    return CheckInputs{std::move(sample.tensors), std::move(sample.fingerprint)};
  }
  if (signature.inputs.empty()) {
    return absl::FailedPreconditionError("config.pbtxt declares no inputs to generate check inputs from");
  }
  for (const InputSpec& spec : signature.inputs) {
    if (!spec.dtype || !spec.dims) {
      return absl::FailedPreconditionError(
          absl::StrCat("config.pbtxt does not declare input '", spec.name, "' fully (dtype and dims)"));
    }
    if (*spec.dtype == DType::kBytes) {
      return absl::FailedPreconditionError(
          absl::StrCat("input '", spec.name, "' takes strings, which cannot be generated meaningfully for a model"));
    }
  }
  CheckInputs out;
  std::vector<std::string> described;
  at::Generator generator = at::detail::createCPUGenerator(/*seed_in=*/20261125);
  for (const InputSpec& spec : signature.inputs) {
    std::vector<int64_t> shape;
    if (signature.max_batch_size > 0) shape.push_back(std::min<int64_t>(2, signature.max_batch_size));
    for (int64_t d : *spec.dims) shape.push_back(d == -1 ? kVariableDim : d);
    const at::ScalarType type = ToScalarType(*spec.dtype);
    const v1::InputRange* range = RangeOf(config, spec.name);
    at::Tensor t;
    std::string range_text;
    try {
      if (*spec.dtype == DType::kBool) {
        t = at::randint(0, 2, shape, generator, at::TensorOptions().dtype(at::kLong)).to(at::kBool);
        range_text = "bool";
      } else if (IsFloatingPoint(*spec.dtype)) {
        double lo = range ? range->min() : -1.0, hi = range ? range->max() : 1.0;
        if (!(hi > lo)) {
          return absl::InvalidArgumentError(
              absl::StrCat("accuracy.inputs '", spec.name, "': max must be greater than min"));
        }
        t = at::empty(shape, at::TensorOptions().dtype(at::kDouble)).uniform_(lo, hi, generator).to(type);
        range_text = absl::StrCat("[", lo, ",", hi, ")");
      } else {
        int64_t lo = range ? static_cast<int64_t>(range->min()) : 0;
        int64_t hi = range ? static_cast<int64_t>(range->max()) : 9;
        if (hi < lo) {
          return absl::InvalidArgumentError(
              absl::StrCat("accuracy.inputs '", spec.name, "': max must not be less than min"));
        }
        t = at::randint(lo, hi + 1, shape, generator, at::TensorOptions().dtype(at::kLong)).to(type);
        range_text = absl::StrCat("[", lo, ",", hi, "]");
      }
    } catch (const std::exception& e) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot make check input '", spec.name, "' of shape [",
                                                       absl::StrJoin(shape, ","),
                                                       "]: ", ConciseTorchMessage(e.what())));
    }
    out.tensors.push_back(std::move(t));
    described.push_back(
        absl::StrCat(spec.name, ":", DTypeName(*spec.dtype), "[", absl::StrJoin(shape, ","), "]", range_text));
  }
  out.fingerprint = absl::StrCat("generated:", absl::StrJoin(described, ";"));
  return out;
}

}  // namespace infergate
