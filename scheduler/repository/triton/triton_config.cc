#include "scheduler/repository/triton/triton_config.h"

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "scheduler/repository/model_config.h"
#include "scheduler/repository/triton/triton_config_rules.h"

namespace infergate {
namespace {

using Json = nlohmann::json;

// Where the configuration came from, for messages ("parameters.config",
// "config.pbtxt"); set for the duration of one read.
thread_local absl::string_view kField = "config";  // NOLINT: per-read message prefix

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(kField, ".", field, ": ", what));
}

absl::Status NotSupported(absl::string_view field, absl::string_view why = "") {
  return Invalid(field, absl::StrCat("is not supported by infergate", why.empty() ? "" : "; ", why));
}

// A list field as a list: a text config without its schema gives a field
// written once as a single value.
Json AsList(const Json& value) { return value.is_array() ? value : Json::array({value}); }

// Triton's TYPE_* names for the dtypes a TorchScript model takes
// (TYPE_STRING: a List[str] argument or result).
absl::StatusOr<v1::DataType> DataTypeOf(const Json& value, const std::string& field) {
  static const std::map<std::string, v1::DataType> kTypes = {
      {"TYPE_FP32", v1::FLOAT32}, {"TYPE_FP16", v1::FLOAT16}, {"TYPE_BF16", v1::BFLOAT16}, {"TYPE_FP64", v1::FLOAT64},
      {"TYPE_INT64", v1::INT64},  {"TYPE_INT32", v1::INT32},  {"TYPE_INT16", v1::INT16},   {"TYPE_INT8", v1::INT8},
      {"TYPE_UINT8", v1::UINT8},  {"TYPE_BOOL", v1::BOOL},    {"TYPE_STRING", v1::BYTES}};
  if (!value.is_string()) return Invalid(field, "expected a TYPE_* name");
  auto it = kTypes.find(value.get<std::string>());
  if (it == kTypes.end()) {
    return Invalid(field, absl::StrCat("'", value.get<std::string>().substr(0, 32),
                                       "' is not a datatype a TorchScript model takes (TYPE_FP32, TYPE_FP16, "
                                       "TYPE_BF16, TYPE_FP64, TYPE_INT64, TYPE_INT32, TYPE_INT16, TYPE_INT8, "
                                       "TYPE_UINT8, TYPE_BOOL, TYPE_STRING)"));
  }
  return it->second;
}

// An integer, as Triton's JSON writes it: a number, or a string for 64-bit values.
absl::StatusOr<int64_t> IntegerOf(const Json& value, const std::string& field, int64_t min) {
  int64_t n = 0;
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return Invalid(field, "is out of range");
    }
    n = value.get<int64_t>();
  } else if (value.is_string()) {
    try {
      size_t used = 0;
      const std::string text = value.get<std::string>();
      n = std::stoll(text, &used);
      if (used != text.size()) return Invalid(field, "expected an integer");
    } catch (const std::exception&) {
      return Invalid(field, "expected an integer");
    }
  } else {
    return Invalid(field, "expected an integer");
  }
  if (n < min) return Invalid(field, absl::StrCat(n, " is below ", min));
  return n;
}

// Whether a value only restates a default that asks for nothing (false,
// 0, "", [], or an object of such values, as Triton's JSON writes out
// unused sections such as "response_cache": {"enable": false}). An empty
// object is not: `"sequence_batching": {}` turns a feature on.
bool IsDefault(const Json& value) {
  if (value.is_object()) {
    if (value.empty()) return false;
    for (const auto& [key, member] : value.items()) {
      if (!IsDefault(member)) return false;
    }
    return true;
  }
  return value.is_null() || (value.is_boolean() && !value.get<bool>()) ||
         (value.is_number() && value.get<double>() == 0) || (value.is_string() && value.get<std::string>().empty()) ||
         (value.is_array() && value.empty());
}

absl::Status ReadTensors(const Json& given, const std::string& field, bool outputs,
                         google::protobuf::RepeatedPtrField<v1::TensorSpec>* out) {
  const Json list = AsList(given);
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = absl::StrCat(field, "[", i, "]");
    const Json& t = list[i];
    if (!t.is_object()) return Invalid(at, "expected an object");
    v1::TensorSpec* spec = out->Add();
    for (const auto& [key, value] : t.items()) {
      const std::string f = absl::StrCat(at, ".", key);
      if (key == "name") {
        if (!value.is_string()) return Invalid(f, "expected a string");
        spec->set_name(value.get<std::string>());
      } else if (key == "data_type") {
        ASSIGN_OR_RETURN(v1::DataType dtype, DataTypeOf(value, f));
        spec->set_dtype(dtype);
      } else if (key == "dims") {
        const Json dims = AsList(value);
        for (size_t d = 0; d < dims.size(); ++d) {
          ASSIGN_OR_RETURN(int64_t dim, IntegerOf(dims[d], absl::StrCat(f, "[", d, "]"), -1));
          spec->add_dims(dim);
        }
      } else if (key == "label_filename" && outputs) {
        if (!value.is_string()) return Invalid(f, "expected a string");
        spec->set_label_filename(value.get<std::string>());
      } else if (key == "reshape") {
        // reshape { shape: [...] }; `shape: []` (a scalar per row) is
        // written out as nothing at all by the text format.
        if (!value.is_object()) return Invalid(f, "expected an object with a shape");
        v1::TensorReshape* reshape = spec->mutable_reshape();
        for (const auto& [rk, rv] : value.items()) {
          if (rk != "shape") return NotSupported(absl::StrCat(f, ".", rk));
          const Json shape = AsList(rv);
          for (size_t d = 0; d < shape.size(); ++d) {
            ASSIGN_OR_RETURN(int64_t dim, IntegerOf(shape[d], absl::StrCat(f, ".shape[", d, "]"), -1));
            reshape->add_shape(dim);
          }
        }
      } else if (key == "format" && !outputs) {
        if (IsDefault(value) || value == "FORMAT_NONE") continue;
        if (value == "FORMAT_NCHW") {
          spec->set_format(v1::FORMAT_NCHW);
        } else if (value == "FORMAT_NHWC") {
          spec->set_format(v1::FORMAT_NHWC);
        } else {
          return Invalid(f, "expected FORMAT_NONE, FORMAT_NCHW or FORMAT_NHWC");
        }
      } else if ((key == "optional" || key == "is_shape_tensor" || key == "allow_ragged_batch" ||
                  key == "is_non_linear_format_io") &&
                 IsDefault(value)) {
        continue;
      } else {
        return NotSupported(f);
      }
    }
  }
  return absl::OkStatus();
}

// Triton's ModelQueuePolicy, field for field the same as infergate's.
absl::Status ReadQueuePolicy(const Json& policy, const std::string& field, v1::QueuePolicy* out) {
  if (!policy.is_object()) return Invalid(field, "expected an object");
  for (const auto& [key, value] : policy.items()) {
    const std::string f = absl::StrCat(field, ".", key);
    if (key == "timeout_action") {
      if (!value.is_string() || (value != "REJECT" && value != "DELAY")) return Invalid(f, "expected REJECT or DELAY");
      out->set_timeout_action(value == "DELAY" ? v1::QueuePolicy::DELAY : v1::QueuePolicy::REJECT);
    } else if (key == "default_timeout_microseconds") {
      ASSIGN_OR_RETURN(int64_t n, IntegerOf(value, f, 0));
      out->set_default_timeout_microseconds(static_cast<uint64_t>(n));
    } else if (key == "allow_timeout_override") {
      if (!value.is_boolean()) return Invalid(f, "expected true or false");
      out->set_allow_timeout_override(value.get<bool>());
    } else if (key == "max_queue_size") {
      ASSIGN_OR_RETURN(int64_t n, IntegerOf(value, f, 0));
      if (n > UINT32_MAX) return Invalid(f, "is out of range");
      out->set_max_queue_size(static_cast<uint32_t>(n));
    } else {
      return NotSupported(f);
    }
  }
  return absl::OkStatus();
}

absl::Status ReadDynamicBatching(const Json& batching, v1::ModelConfig* config) {
  const std::string field = "dynamic_batching";
  if (!batching.is_object()) return Invalid(field, "expected an object");
  for (const auto& [key, value] : batching.items()) {
    const std::string f = absl::StrCat(field, ".", key);
    if (key == "preferred_batch_size") {
      const Json sizes = AsList(value);
      for (size_t i = 0; i < sizes.size(); ++i) {
        ASSIGN_OR_RETURN(int64_t n, IntegerOf(sizes[i], absl::StrCat(f, "[", i, "]"), 1));
        config->mutable_dynamic_batching()->add_preferred_batch_sizes(static_cast<uint32_t>(n));
      }
    } else if (key == "max_queue_delay_microseconds") {
      ASSIGN_OR_RETURN(int64_t n, IntegerOf(value, f, 0));
      config->mutable_dynamic_batching()->set_max_queue_delay_us(static_cast<uint64_t>(n));
    } else if (key == "priority_levels" || key == "default_priority_level") {
      ASSIGN_OR_RETURN(int64_t n, IntegerOf(value, f, 0));
      if (n > UINT32_MAX) return Invalid(f, "is out of range");
      if (key == "priority_levels") config->set_priority_levels(static_cast<uint32_t>(n));
      if (key == "default_priority_level") config->set_default_priority_level(static_cast<uint32_t>(n));
    } else if (key == "default_queue_policy") {
      RETURN_IF_ERROR(ReadQueuePolicy(value, f, config->mutable_default_queue_policy()));
    } else if (key == "preserve_ordering" && IsDefault(value)) {
      continue;
    } else {
      return NotSupported(f);
    }
  }
  return absl::OkStatus();
}

absl::Status ReadInstanceGroups(const Json& given, v1::ModelConfig* config) {
  const std::string field = "instance_group";
  const Json groups = AsList(given);
  bool any = false;
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string at = absl::StrCat(field, "[", i, "]");
    const Json& g = groups[i];
    if (!g.is_object()) return Invalid(at, "expected an object");
    std::string kind = "KIND_AUTO";
    std::vector<int64_t> gpus;
    int64_t count = 0;
    for (const auto& [key, value] : g.items()) {
      const std::string f = absl::StrCat(at, ".", key);
      if (key == "name") continue;
      if (key == "kind") {
        if (!value.is_string()) return Invalid(f, "expected KIND_AUTO, KIND_CPU or KIND_GPU");
        kind = value.get<std::string>();
        if (kind != "KIND_AUTO" && kind != "KIND_CPU" && kind != "KIND_GPU") {
          return NotSupported(f, absl::StrCat("'", kind.substr(0, 32), "'; use KIND_AUTO, KIND_CPU or KIND_GPU"));
        }
      } else if (key == "count") {
        ASSIGN_OR_RETURN(int64_t n, IntegerOf(value, f, 0));
        if (n > kMaxAcceleratorInstances) {
          return Invalid(f, absl::StrCat(n, " is more than ", kMaxAcceleratorInstances, " instances on one device"));
        }
        count = n;
      } else if (key == "gpus") {
        const Json listed = AsList(value);
        for (size_t d = 0; d < listed.size(); ++d) {
          ASSIGN_OR_RETURN(int64_t n, IntegerOf(listed[d], absl::StrCat(f, "[", d, "]"), 0));
          gpus.push_back(n);
        }
      } else {
        return NotSupported(f);
      }
    }
    // A GPU (or AUTO) group's count: how many of the model's batches run at
    // once on each accelerator. The CPU's count is its workers' business
    // (sized to its cores), so a CPU group's is accepted and not used.
    if (kind != "KIND_CPU" && count > static_cast<int64_t>(config->accelerator_instances())) {
      config->set_accelerator_instances(static_cast<uint32_t>(count));
    }
    if (kind == "KIND_AUTO") {
      any = true;
    } else if (kind == "KIND_CPU") {
      config->add_devices("cpu");
    } else if (gpus.empty()) {
      config->add_devices("cuda");
    } else {
      for (int64_t gpu : gpus) config->add_devices(absl::StrCat("cuda:", gpu));
    }
  }
  if (any) config->clear_devices();  // a KIND_AUTO group: anywhere
  return absl::OkStatus();
}

// A warm-up input's file: a plain name, found in the model folder's
// warmup/ folder when the sample is made.
bool PlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

// Triton's model_warmup: samples of named inputs, each zeros, random data
// or a file's bytes, `batch_size` rows, run `count` times.
absl::Status ReadWarmup(const Json& given, v1::ModelConfig* config) {
  const Json samples = AsList(given);
  for (size_t i = 0; i < samples.size(); ++i) {
    const std::string at = absl::StrCat("model_warmup[", i, "]");
    const Json& sample = samples[i];
    if (!sample.is_object()) return Invalid(at, "expected an object");
    v1::WarmupSample* out = config->add_warmup_samples();
    for (const auto& [key, value] : sample.items()) {
      const std::string f = absl::StrCat(at, ".", key);
      if (key == "name") {
        if (!value.is_string()) return Invalid(f, "expected a string");
        out->set_name(value.get<std::string>().substr(0, 256));
      } else if (key == "batch_size" || key == "count") {
        ASSIGN_OR_RETURN(int64_t n, IntegerOf(value, f, key == "batch_size" ? 1 : 0));
        if (n > 1024) return Invalid(f, absl::StrCat(n, " is more than 1024"));
        key == "batch_size" ? out->set_batch_size(static_cast<uint32_t>(n)) : out->set_count(static_cast<uint32_t>(n));
      } else if (key == "inputs") {
        // A map: {key, value} entries in a text config, an object in JSON.
        std::vector<std::pair<std::string, Json>> entries;
        if (value.is_object() && !value.contains("key")) {
          for (const auto& [name, input] : value.items()) entries.emplace_back(name, input);
        } else {
          for (const Json& entry : AsList(value)) {
            if (!entry.is_object() || !entry.contains("key") || !entry["key"].is_string()) {
              return Invalid(f, "expected entries { key: \"INPUT\" value: { ... } }");
            }
            entries.emplace_back(entry["key"].get<std::string>(), entry.contains("value") ? entry["value"] : Json());
          }
        }
        for (const auto& [name, input] : entries) {
          const std::string g = absl::StrCat(f, "[\"", name.substr(0, 64), "\"]");
          if (!input.is_object()) return Invalid(g, "expected an object");
          v1::WarmupInput* w = out->add_inputs();
          w->set_name(name);
          int sources = 0;
          for (const auto& [k, v] : input.items()) {
            const std::string h = absl::StrCat(g, ".", k);
            if (k == "data_type") {
              ASSIGN_OR_RETURN(v1::DataType type, DataTypeOf(v, h));
              w->set_dtype(type);
            } else if (k == "dims") {
              const Json dims = AsList(v);
              for (size_t d = 0; d < dims.size(); ++d) {
                ASSIGN_OR_RETURN(int64_t n, IntegerOf(dims[d], absl::StrCat(h, "[", d, "]"), 1));
                w->add_dims(n);
              }
            } else if (k == "zero_data" || k == "random_data") {
              ++sources;  // Triton uses the field being set, whatever its value
              w->set_source(k == "zero_data" ? v1::WarmupInput::ZERO_DATA : v1::WarmupInput::RANDOM_DATA);
            } else if (k == "input_data_file") {
              ++sources;
              if (!v.is_string() || !PlainFileName(v.get<std::string>())) {
                return Invalid(h, "expected a file name in the model folder's warmup/ folder");
              }
              w->set_source(v1::WarmupInput::DATA_FILE);
              w->set_data_file(v.get<std::string>());
            } else {
              return NotSupported(h);
            }
          }
          if (sources != 1) return Invalid(g, "expected one of zero_data, random_data or input_data_file");
          if (w->dtype() == v1::DATA_TYPE_UNSPECIFIED) return Invalid(g + ".data_type", "must be set");
        }
      } else {
        return NotSupported(f);
      }
    }
    if (out->batch_size() == 0) return Invalid(at + ".batch_size", "must be at least 1");
  }
  config->set_warmup(config->warmup_samples_size() > 0);
  return absl::OkStatus();
}

absl::Status ReadVersionPolicy(const Json& policy, v1::ModelConfig* config) {
  const std::string field = "version_policy";
  if (!policy.is_object() || policy.size() != 1) return Invalid(field, "expected one of latest, all or specific");
  const auto only = policy.begin();
  const std::string key = only.key();
  const Json& value = only.value();
  const std::string f = absl::StrCat(field, ".", key);
  if (!value.is_object()) return Invalid(f, "expected an object");
  v1::VersionPolicy* out = config->mutable_version_policy();
  if (key == "all") {
    out->mutable_all();
  } else if (key == "latest") {
    auto n = value.find("num_versions");
    if (n == value.end() || value.size() != 1) return Invalid(f, "expected {\"num_versions\": N}");
    ASSIGN_OR_RETURN(int64_t count, IntegerOf(*n, f + ".num_versions", 1));
    out->mutable_latest()->set_num_versions(static_cast<uint32_t>(count));
  } else if (key == "specific") {
    auto found = value.find("versions");
    if (found == value.end() || value.size() != 1) return Invalid(f, "expected {\"versions\": [...]}");
    const Json versions = AsList(*found);
    for (size_t i = 0; i < versions.size(); ++i) {
      ASSIGN_OR_RETURN(int64_t v, IntegerOf(versions[i], absl::StrCat(f, ".versions[", i, "]"), 1));
      out->mutable_specific()->add_versions(v);
    }
  } else {
    return Invalid(field, "expected one of latest, all or specific");
  }
  return absl::OkStatus();
}

// Triton's PyTorch backend parameters, as a map ({"NAME": {"string_value":
// ..}}) or as text-format entries ({key: "NAME" value: {string_value: ..}}).
// Accepted: the ones that only restate what infergate always does, and
// DISABLE_OPTIMIZED_EXECUTION (torchscript_optimization).
absl::Status ReadParameters(const Json& given, v1::ModelConfig* config) {
  std::vector<std::pair<std::string, Json>> entries;
  for (const Json& item : AsList(given)) {
    if (!item.is_object()) return Invalid("parameters", "expected an object");
    if (item.contains("key")) {
      if (!item["key"].is_string()) return Invalid("parameters.key", "expected a string");
      entries.emplace_back(item["key"].get<std::string>(), item.value("value", Json::object()));
    } else {
      for (const auto& [name, value] : item.items()) entries.emplace_back(name, value);
    }
  }
  for (const auto& [name, value] : entries) {
    const std::string f = absl::StrCat("parameters.", name.substr(0, 64));
    std::string text;
    if (value.is_object() && value.contains("string_value") && value["string_value"].is_string()) {
      text = value["string_value"].get<std::string>();
    }
    // Models run under inference mode (no autograd) here, always.
    if (name == "INFERENCE_MODE" && (text == "true" || text == "1")) continue;
    if (name == "DISABLE_OPTIMIZED_EXECUTION" && (text == "true" || text == "false")) {
      config->set_torchscript_optimization(text == "true" ? v1::TORCHSCRIPT_OPTIMIZE_OFF
                                                          : v1::TORCHSCRIPT_OPTIMIZE_AUTO);
      continue;
    }
    return NotSupported(f,
                        "infergate takes INFERENCE_MODE \"true\" and DISABLE_OPTIMIZED_EXECUTION "
                        "\"true\" or \"false\" only; it runs TorchScript in inference mode always");
  }
  return absl::OkStatus();
}

absl::StatusOr<ConfigOverride> ReadFields(const Json& parsed, absl::string_view model) {
  if (!parsed.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(kField, ": expected a JSON object (a Triton model configuration)"));
  }
  ConfigOverride out;
  v1::ModelConfig& config = out.values;
  for (const auto& [key, value] : parsed.items()) {
    absl::Status s;
    if (key == "name") {
      if (!value.is_string() || value.get<std::string>() != model) {
        return Invalid(key, absl::StrCat("must be the model's name, '", model, "'"));
      }
    } else if (key == "platform" || key == "backend") {
      if (!value.is_string()) return Invalid(key, "expected a string");
      const std::string v = value.get<std::string>();
      if (!v.empty() && v != "pytorch_libtorch" && v != "pytorch" && v != "libtorch" && v != "torch_aoti") {
        return NotSupported(absl::StrCat(key, " '", v.substr(0, 32), "'"),
                            "infergate serves TorchScript (pytorch_libtorch) and AOTInductor packages (torch_aoti)");
      }
    } else if (key == "max_batch_size") {
      ASSIGN_OR_RETURN(int64_t n, IntegerOf(value, key, 0));
      if (n > UINT32_MAX) return Invalid(key, "is out of range");
      config.set_max_batch_size(static_cast<uint32_t>(n));
      out.fields.insert("max_batch_size");
    } else if (key == "input") {
      s = ReadTensors(value, key, false, config.mutable_inputs());
      out.fields.insert("inputs");
    } else if (key == "output") {
      s = ReadTensors(value, key, true, config.mutable_outputs());
      out.fields.insert("outputs");
    } else if (key == "dynamic_batching") {
      s = ReadDynamicBatching(value, &config);
      out.fields.insert("dynamic_batching");
      if (value.is_object() && value.contains("priority_levels")) out.fields.insert("priority_levels");
      if (value.is_object() && value.contains("default_priority_level")) out.fields.insert("default_priority_level");
      if (value.is_object() && value.contains("default_queue_policy")) out.fields.insert("default_queue_policy");
    } else if (key == "instance_group") {
      s = ReadInstanceGroups(value, &config);
      out.fields.insert("devices");
      out.fields.insert("accelerator_instances");
    } else if (key == "version_policy") {
      s = ReadVersionPolicy(value, &config);
      out.fields.insert("version_policy");
    } else if (key == "model_warmup") {
      s = ReadWarmup(value, &config);
      out.fields.insert("warmup");
      out.fields.insert("warmup_samples");
    } else if (key == "default_model_filename") {
      if (value != "model.pt" && value != "model.pt2") {
        return NotSupported(key,
                            "a version's file is <version>/model.pt (TorchScript) or model.pt2 (AOTInductor) here");
      }
    } else if (key == "parameters") {
      s = ReadParameters(value, &config);
      out.fields.insert("torchscript_optimization");
    } else if (IsDefault(value)) {
      continue;  // an empty or zero field asks for nothing (Triton's JSON writes some out)
    } else {
      return NotSupported(key);
    }
    if (!s.ok()) return s;
  }
  return out;
}

}  // namespace

absl::StatusOr<ConfigOverride> ReadTritonConfig(const nlohmann::json& config, absl::string_view model,
                                                absl::string_view source) {
  const absl::string_view outer = kField;
  kField = source;
  // Every access checks the value's type first; this keeps a client's
  // text from ever ending the process should one be missed.
  absl::StatusOr<ConfigOverride> out;
  try {
    if (absl::Status broken = CheckTritonRules(config, model, source); !broken.ok()) {
      out = broken;
    } else {
      out = ReadFields(config, model);
    }
  } catch (const nlohmann::json::exception& e) {
    out = absl::InvalidArgumentError(absl::StrCat(source, ": ", e.what()));
  }
  kField = outer;
  return out;
}

bool LooksLikeTritonConfig(const nlohmann::json& config) {
  if (!config.is_object()) return false;
  for (const char* key :
       {"platform", "backend", "input", "output", "instance_group", "default_model_filename", "model_warmup"}) {
    if (config.contains(key)) return true;
  }
  return false;
}

}  // namespace infergate
