#include "service/triton_model_config.h"

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/json_scan.h"

namespace infergate {
namespace {

using Json = nlohmann::json;
constexpr char kField[] = "parameters.config";

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(kField, ".", field, ": ", what));
}

absl::Status NotSupported(absl::string_view field, absl::string_view why = "") {
  return Invalid(field, absl::StrCat("is not supported by infergate", why.empty() ? "" : "; ", why));
}

// Triton's TYPE_* names for the dtypes a TorchScript model takes.
absl::StatusOr<v1::DataType> DataTypeOf(const Json& value, const std::string& field) {
  static const std::map<std::string, v1::DataType> kTypes = {
      {"TYPE_FP32", v1::FLOAT32}, {"TYPE_FP16", v1::FLOAT16}, {"TYPE_BF16", v1::BFLOAT16},
      {"TYPE_FP64", v1::FLOAT64}, {"TYPE_INT64", v1::INT64},  {"TYPE_INT32", v1::INT32},
      {"TYPE_INT16", v1::INT16},  {"TYPE_INT8", v1::INT8},    {"TYPE_UINT8", v1::UINT8},
      {"TYPE_BOOL", v1::BOOL}};
  if (!value.is_string()) return Invalid(field, "expected a TYPE_* name");
  auto it = kTypes.find(value.get<std::string>());
  if (it == kTypes.end()) {
    return Invalid(field, absl::StrCat("'", value.get<std::string>().substr(0, 32),
                                       "' is not a datatype a TorchScript model takes (TYPE_FP32, TYPE_FP16, "
                                       "TYPE_BF16, TYPE_FP64, TYPE_INT64, TYPE_INT32, TYPE_INT16, TYPE_INT8, "
                                       "TYPE_UINT8, TYPE_BOOL)"));
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

absl::Status ReadTensors(const Json& list, const std::string& field, bool outputs,
                         google::protobuf::RepeatedPtrField<v1::TensorSpec>* out) {
  if (!list.is_array()) return Invalid(field, "expected an array");
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
        absl::StatusOr<v1::DataType> dtype = DataTypeOf(value, f);
        if (!dtype.ok()) return dtype.status();
        spec->set_dtype(*dtype);
      } else if (key == "dims") {
        if (!value.is_array()) return Invalid(f, "expected an array");
        for (size_t d = 0; d < value.size(); ++d) {
          absl::StatusOr<int64_t> dim = IntegerOf(value[d], absl::StrCat(f, "[", d, "]"), -1);
          if (!dim.ok()) return dim.status();
          spec->add_dims(*dim);
        }
      } else if (key == "label_filename" && outputs) {
        if (!value.is_string()) return Invalid(f, "expected a string");
        spec->set_label_filename(value.get<std::string>());
      } else if ((key == "optional" || key == "is_shape_tensor" || key == "allow_ragged_batch" ||
                  key == "is_non_linear_format_io") && IsDefault(value)) {
        continue;
      } else if (key == "format" && (IsDefault(value) || value == "FORMAT_NONE")) {
        continue;
      } else {
        return NotSupported(f);
      }
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
      if (!value.is_array()) return Invalid(f, "expected an array");
      for (size_t i = 0; i < value.size(); ++i) {
        absl::StatusOr<int64_t> n = IntegerOf(value[i], absl::StrCat(f, "[", i, "]"), 1);
        if (!n.ok()) return n.status();
        config->mutable_dynamic_batching()->add_preferred_batch_sizes(static_cast<uint32_t>(*n));
      }
    } else if (key == "max_queue_delay_microseconds") {
      absl::StatusOr<int64_t> n = IntegerOf(value, f, 0);
      if (!n.ok()) return n.status();
      config->mutable_dynamic_batching()->set_max_queue_delay_us(static_cast<uint64_t>(*n));
    } else if (key == "priority_levels" || key == "default_priority_level") {
      absl::StatusOr<int64_t> n = IntegerOf(value, f, 0);
      if (!n.ok()) return n.status();
      if (*n > UINT32_MAX) return Invalid(f, "is out of range");
      if (key == "priority_levels") config->set_priority_levels(static_cast<uint32_t>(*n));
      if (key == "default_priority_level") config->set_default_priority_level(static_cast<uint32_t>(*n));
    } else if (key == "preserve_ordering" && IsDefault(value)) {
      continue;
    } else {
      return NotSupported(f);
    }
  }
  return absl::OkStatus();
}

absl::Status ReadInstanceGroups(const Json& groups, v1::ModelConfig* config) {
  const std::string field = "instance_group";
  if (!groups.is_array()) return Invalid(field, "expected an array");
  bool any = false;
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string at = absl::StrCat(field, "[", i, "]");
    const Json& g = groups[i];
    if (!g.is_object()) return Invalid(at, "expected an object");
    std::string kind = "KIND_AUTO";
    std::vector<int64_t> gpus;
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
        absl::StatusOr<int64_t> n = IntegerOf(value, f, 0);
        if (!n.ok()) return n.status();
        if (*n > 1) {
          return NotSupported(f, "a model has one instance per device, served by that device's workers "
                                 "(--cpu-workers on the CPU)");
        }
      } else if (key == "gpus") {
        if (!value.is_array()) return Invalid(f, "expected an array");
        for (size_t d = 0; d < value.size(); ++d) {
          absl::StatusOr<int64_t> n = IntegerOf(value[d], absl::StrCat(f, "[", d, "]"), 0);
          if (!n.ok()) return n.status();
          gpus.push_back(*n);
        }
      } else {
        return NotSupported(f);
      }
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

absl::Status ReadVersionPolicy(const Json& policy, v1::ModelConfig* config) {
  const std::string field = "version_policy";
  if (!policy.is_object() || policy.size() != 1) return Invalid(field, "expected one of latest, all or specific");
  const std::string key = policy.begin().key();
  const Json& value = policy.begin().value();
  const std::string f = absl::StrCat(field, ".", key);
  if (!value.is_object()) return Invalid(f, "expected an object");
  v1::VersionPolicy* out = config->mutable_version_policy();
  if (key == "all") {
    out->mutable_all();
  } else if (key == "latest") {
    auto n = value.find("num_versions");
    if (n == value.end() || value.size() != 1) return Invalid(f, "expected {\"num_versions\": N}");
    absl::StatusOr<int64_t> count = IntegerOf(*n, f + ".num_versions", 1);
    if (!count.ok()) return count.status();
    out->mutable_latest()->set_num_versions(static_cast<uint32_t>(*count));
  } else if (key == "specific") {
    auto versions = value.find("versions");
    if (versions == value.end() || value.size() != 1 || !versions->is_array()) {
      return Invalid(f, "expected {\"versions\": [...]}");
    }
    for (size_t i = 0; i < versions->size(); ++i) {
      absl::StatusOr<int64_t> v = IntegerOf((*versions)[i], absl::StrCat(f, ".versions[", i, "]"), 1);
      if (!v.ok()) return v.status();
      out->mutable_specific()->add_versions(*v);
    }
  } else {
    return Invalid(field, "expected one of latest, all or specific");
  }
  return absl::OkStatus();
}

absl::StatusOr<ConfigOverride> ReadTritonConfig(absl::string_view json, absl::string_view model) {
  absl::StatusOr<Json> parsed = ParseBoundedJson(json, kField);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(kField, ": expected a JSON object (a Triton model configuration)"));
  }
  ConfigOverride out;
  v1::ModelConfig& config = out.values;
  for (const auto& [key, value] : parsed->items()) {
    absl::Status s;
    if (key == "name") {
      if (!value.is_string() || value.get<std::string>() != model) {
        return Invalid(key, absl::StrCat("must be the model's name, '", model, "'"));
      }
    } else if (key == "platform" || key == "backend") {
      if (!value.is_string()) return Invalid(key, "expected a string");
      const std::string v = value.get<std::string>();
      if (!v.empty() && v != "pytorch_libtorch" && v != "pytorch" && v != "libtorch") {
        return NotSupported(absl::StrCat(key, " '", v.substr(0, 32), "'"),
                            "infergate serves TorchScript models (pytorch_libtorch)");
      }
    } else if (key == "max_batch_size") {
      absl::StatusOr<int64_t> n = IntegerOf(value, key, 0);
      if (!n.ok()) return n.status();
      if (*n > UINT32_MAX) return Invalid(key, "is out of range");
      config.set_max_batch_size(static_cast<uint32_t>(*n));
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
    } else if (key == "instance_group") {
      s = ReadInstanceGroups(value, &config);
      out.fields.insert("devices");
    } else if (key == "version_policy") {
      s = ReadVersionPolicy(value, &config);
      out.fields.insert("version_policy");
    } else if (key == "model_warmup") {
      if (!value.is_array()) return Invalid(key, "expected an array");
      config.set_warmup(!value.empty());
      out.fields.insert("warmup");
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

absl::StatusOr<ConfigOverride> ConfigOverrideFromTritonJson(absl::string_view json, absl::string_view model) {
  // Every access above checks the value's type first; this keeps a client's
  // text from ever ending the process should one be missed.
  try {
    return ReadTritonConfig(json, model);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(kField, ": ", e.what()));
  }
}

}  // namespace infergate
