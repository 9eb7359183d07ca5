#include "scheduler/repository/model_config.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "infergate/v1/tensor.pb.h"
#include "scheduler/repository/class_labels.h"
#include "scheduler/repository/triton/text_proto_json.h"
#include "scheduler/repository/triton/triton_config.h"
#include "scheduler/repository/version_policy.h"

namespace infergate {
namespace {

// Collects the text parser's complaints instead of letting it print them.
class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first_.empty()) first_ = absl::StrCat("line ", line + 1, " column ", column + 1, ": ", message);
  }
  void AddWarning(int, int, const std::string&) override {}
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

// Element counts past this are refused: no tensor could hold them (a count
// times any element's size must fit 64 bits), and a product that wrapped
// around could match another.
constexpr int64_t kMaxElements = int64_t{1} << 60;
constexpr int64_t kOverflow = -2;

// `n` times `d` (both >= 1), or kOverflow past kMaxElements.
int64_t TimesChecked(int64_t n, int64_t d) {
  if (n == kOverflow || d > kMaxElements / n) return kOverflow;
  return n * d;
}

// A shape's element count, -1 when a dimension is variable (Triton's
// GetElementCount; an empty shape counts 0 here, as the reshape rule wants),
// kOverflow past kMaxElements.
int64_t ElementCount(const google::protobuf::RepeatedField<int64_t>& shape) {
  if (shape.empty()) return 0;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == -1) return -1;
    n = TimesChecked(n, d);
  }
  return n;
}

// The element counts between a shape's variable dimensions ([2, 4, -1, 6]:
// 8, 6).
std::vector<int64_t> Trunks(const google::protobuf::RepeatedField<int64_t>& shape) {
  std::vector<int64_t> trunks;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == -1) {
      trunks.push_back(n);
      n = 1;
    } else {
      n = TimesChecked(n, d);
    }
  }
  trunks.push_back(n);
  return trunks;
}

// Triton's rules for dims and reshape (model_config_utils' ValidateIOShape),
// with its words: "model input 'x' has different size for dims and
// reshape". `prefix` is "model input 'x' " or "model output 'x' ".
absl::Status CheckReshape(const v1::TensorSpec& s, const std::string& prefix, bool batching, absl::string_view model) {
  auto refused = [&](absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, rule, " for ", model));
  };
  for (int64_t d : s.dims()) {
    if (d < 1 && d != -1) return refused("dimension must be integer >= 1, or -1 to indicate a variable-size dimension");
  }
  auto overflows = [](const google::protobuf::RepeatedField<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n = d > 0 ? TimesChecked(n, d) : n;
    return n == kOverflow;
  };
  if (overflows(s.dims())) return refused("dims hold more than 2^60 elements");
  if (!s.has_reshape()) return absl::OkStatus();
  if (overflows(s.reshape().shape())) return refused("reshape holds more than 2^60 elements");
  for (int64_t d : s.reshape().shape()) {
    if (d < 1 && d != -1) {
      return refused("reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension");
    }
  }
  if (!batching && s.reshape().shape().empty()) {
    return refused("cannot have empty reshape for non-batching model as scalar tensors are not supported");
  }
  const int64_t dims_size = ElementCount(s.dims());
  const int64_t reshape_size = ElementCount(s.reshape().shape());
  // An empty reshape (a scalar per row) takes dims of one element.
  if (dims_size != reshape_size && (reshape_size != 0 || dims_size != 1)) {
    return refused("has different size for dims and reshape");
  }
  if (dims_size == -1) {
    const std::vector<int64_t> from = Trunks(s.dims());
    const std::vector<int64_t> to = Trunks(s.reshape().shape());
    if (from.size() != to.size())
      return refused("has different number of variable-size dimensions for dims and reshape");
    if (from != to) return refused("has different size for dims and reshape");
  }
  return absl::OkStatus();
}

absl::Status CheckSpecs(const google::protobuf::RepeatedPtrField<v1::TensorSpec>& specs, absl::string_view kind,
                        bool batching, absl::string_view model) {
  std::set<std::string> seen;
  for (int i = 0; i < specs.size(); ++i) {
    const v1::TensorSpec& s = specs[i];
    std::string where = absl::StrCat(kind, "[", i, "]");
    if (s.name().empty()) return absl::InvalidArgumentError(absl::StrCat(where, ".name: is empty"));
    if (!seen.insert(s.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".name: '", s.name(), "' is declared twice"));
    }
    if (!DTypeFromProto(s.dtype())) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".dtype: must be set for '", s.name(), "'"));
    }
    if (s.dims_size() > kMaxTensorRank) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".dims: rank ", s.dims_size(), " exceeds the limit of ", kMaxTensorRank));
    }
    const std::string prefix = absl::StrCat(kind == "outputs" ? "model output '" : "model input '", s.name(), "' ");
    for (int d = 0; d < s.dims_size(); ++d) {
      if (s.dims(d) < -1 || s.dims(d) == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".dims[", d, "]: ", s.dims(d), " is not -1 (variable) or a positive size (", prefix,
            "dimension must be integer >= 1, or -1 to indicate a variable-size dimension for ", model, ")"));
      }
    }
    if (s.reshape().shape_size() > kMaxTensorRank) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".reshape.shape: rank ", s.reshape().shape_size(),
                                                     " exceeds the limit of ", kMaxTensorRank));
    }
    if (absl::Status r = CheckReshape(s, prefix, batching, model); !r.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".reshape: ", r.message()));
    }
    if (s.format() != v1::FORMAT_NONE && (kind == "outputs" || s.dims_size() != 3)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".format: ", kind == "outputs" ? "an output has no format" : "model input NHWC/NCHW require 3 dims"));
    }
    if (!s.label_filename().empty()) {
      if (kind != "outputs") {
        return absl::InvalidArgumentError(absl::StrCat(where, ".label_filename: only outputs have class labels"));
      }
      if (absl::Status name = CheckLabelFileName(s.label_filename()); !name.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".label_filename: ", name.message()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::ModelConfig> ParseModelConfig(absl::string_view text, absl::string_view folder_name,
                                                 ConfigNaming naming) {
  v1::ModelConfig config;
  google::protobuf::TextFormat::Parser parser;
  ErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &config)) {
    // A config written for Triton's PyTorch backend is read as Triton's
    // schema, each field it has that infergate does not serve refused by name.
    absl::StatusOr<nlohmann::json> tree = TextProtoToJson(text);
    if (tree.ok() && LooksLikeTritonConfig(*tree)) {
      if (naming == ConfigNaming::kServedAs) tree->erase("name");
      ASSIGN_OR_RETURN(ConfigOverride triton, ReadTritonConfig(*tree, folder_name, "config.pbtxt"));
      absl::StatusOr<v1::ModelConfig> checked = CheckModelConfig(std::move(triton.values), folder_name, "config.pbtxt");
      if (checked.ok()) checked->set_triton_config_text(std::string(text));
      return checked;
    }
    if (!tree.ok()) {
      // Neither schema reads it: say why for both (a Triton config that is
      // broken should not be reported only as infergate's).
      return absl::InvalidArgumentError(
          absl::StrCat("config.pbtxt: ", errors.first(), "; read as Triton's: ", tree.status().message()));
    }
    return absl::InvalidArgumentError(absl::StrCat("config.pbtxt: ", errors.first()));
  }
  if (naming == ConfigNaming::kServedAs) config.clear_name();
  if (!config.triton_config_text().empty()) {
    return absl::InvalidArgumentError("config.pbtxt: triton_config_text: is set by the server, not in a config");
  }
  return CheckModelConfig(std::move(config), folder_name, "config.pbtxt");
}

absl::StatusOr<v1::ModelConfig> CheckModelConfig(v1::ModelConfig config, absl::string_view folder_name,
                                                 absl::string_view source) {
  auto invalid = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", message));
  };
  if (!config.name().empty() && config.name() != folder_name) {
    return invalid(absl::StrCat("name '", config.name(), "' does not match the model folder '", folder_name, "'"));
  }
  config.set_name(std::string(folder_name));
  // Triton's ModelConfig carries it as an int32.
  if (config.max_batch_size() > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
    return invalid(absl::StrCat("max_batch_size: ", config.max_batch_size(), " is more than 2147483647"));
  }
  const bool batching = config.max_batch_size() > 0;
  if (absl::Status s = CheckSpecs(config.inputs(), "inputs", batching, folder_name); !s.ok()) {
    return invalid(s.message());
  }
  if (absl::Status s = CheckSpecs(config.outputs(), "outputs", batching, folder_name); !s.ok()) {
    return invalid(s.message());
  }
  const auto& preferred = config.dynamic_batching().preferred_batch_sizes();
  for (int i = 0; i < preferred.size(); ++i) {
    if (preferred[i] == 0 || preferred[i] > config.max_batch_size()) {
      return invalid(absl::StrCat("dynamic_batching.preferred_batch_sizes[", i, "]: ", preferred[i],
                                  " is not in 1..max_batch_size (", config.max_batch_size(), ")"));
    }
  }
  if (config.default_priority_level() > config.priority_levels()) {
    return invalid(absl::StrCat("default_priority_level: ", config.default_priority_level(),
                                " is beyond priority_levels (", config.priority_levels(),
                                config.priority_levels() == 0 ? ", which leaves priorities off)" : ")"));
  }
  for (int i = 0; i < config.devices_size(); ++i) {
    absl::StatusOr<DeviceRequest> device = ParseDeviceRequest(config.devices(i), absl::StrCat("devices[", i, "]"));
    if (!device.ok()) return invalid(device.status().message());
    if (device->automatic) return invalid(absl::StrCat("devices[", i, "]: name a device or a kind, not 'auto'"));
  }
  if (config.accelerator_instances() > kMaxAcceleratorInstances) {
    return invalid(absl::StrCat("accelerator_instances: ", config.accelerator_instances(), " is more than ",
                                kMaxAcceleratorInstances, " batches at once on one device"));
  }
  if (absl::Status s = ValidateVersionPolicy(config.version_policy()); !s.ok()) return invalid(s.message());
  for (int i = 0; i < config.warmup_samples_size(); ++i) {
    const v1::WarmupSample& sample = config.warmup_samples(i);
    const std::string at = absl::StrCat("warmup_samples[", i, "]");
    const uint32_t most = batching ? config.max_batch_size() : 1;
    if (sample.batch_size() < 1 || sample.batch_size() > most) {
      return invalid(absl::StrCat(at, ".batch_size: ", sample.batch_size(), " is not in 1..", most,
                                  batching ? " (max_batch_size)" : " (the model does not batch)"));
    }
    for (const v1::WarmupInput& input : sample.inputs()) {
      const bool declared = std::any_of(config.inputs().begin(), config.inputs().end(),
                                        [&](const v1::TensorSpec& t) { return t.name() == input.name(); });
      if (config.inputs_size() > 0 && !declared) {
        return invalid(absl::StrCat(at, ".inputs: '", input.name(), "' is not an input of the model"));
      }
    }
  }
  if (config.warmup_samples_size() > 0) config.set_warmup(true);
  return config;
}

InputSignature DeclaredSignature(const v1::ModelConfig& config) {
  InputSignature sig;
  sig.max_batch_size = config.max_batch_size();
  for (const v1::TensorSpec& s : config.inputs()) {
    InputSpec spec;
    spec.name = s.name();
    spec.dtype = DTypeFromProto(s.dtype());
    spec.dims = std::vector<int64_t>(s.dims().begin(), s.dims().end());
    sig.inputs.push_back(std::move(spec));
  }
  return sig;
}

bool DeviceAllowed(const v1::ModelConfig& config, const DeviceId& device) {
  bool kind_allowed = config.allowed_devices_size() == 0;
  for (int k : config.allowed_devices()) {
    kind_allowed |= (k == v1::CPU && device.kind == DeviceKind::kCpu) ||
                    (k == v1::CUDA && device.kind == DeviceKind::kCuda) ||
                    (k == v1::MPS && device.kind == DeviceKind::kMps);
  }
  if (!kind_allowed) return false;
  if (config.devices_size() == 0) return true;
  for (const std::string& text : config.devices()) {
    absl::StatusOr<DeviceRequest> named = ParseDeviceRequest(text);  // validated when the config was parsed
    if (named.ok() && !named->automatic && named->kind == device.kind &&
        (named->any_index || named->index == device.index)) {
      return true;
    }
  }
  return false;
}

}  // namespace infergate
