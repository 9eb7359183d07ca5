#include "scheduler/repository/triton/triton_config_rules.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace infergate {
namespace {

using Json = nlohmann::json;

// A repeated field as a list (a text config gives a field written once as
// a single value); an absent one as an empty list.
Json ListOf(const Json& parent, const char* key) {
  auto it = parent.find(key);
  if (it == parent.end()) return Json::array();
  return it->is_array() ? *it : Json::array({*it});
}

std::optional<int64_t> OptionalIntegerOf(const Json& value) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return value.get<int64_t>();
  }
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    int64_t n = 0;
    size_t used = 0;
    try {
      n = std::stoll(text, &used);
    } catch (...) {
      return std::nullopt;
    }
    if (used == text.size()) return n;
  }
  return std::nullopt;
}

// A field's integer, 0 when absent (protobuf's default) or not one.
int64_t IntegerField(const Json& parent, const char* key) {
  auto it = parent.find(key);
  if (it == parent.end()) return 0;
  return OptionalIntegerOf(*it).value_or(0);
}

std::string StringField(const Json& parent, const char* key, const std::string& otherwise = "") {
  auto it = parent.find(key);
  return it != parent.end() && it->is_string() ? it->get<std::string>() : otherwise;
}

bool IsTrue(const Json& parent, const char* key) {
  auto it = parent.find(key);
  return it != parent.end() && ((it->is_boolean() && it->get<bool>()) || (it->is_string() && *it == "true"));
}

std::set<std::string> NamesOf(const Json& tensors) {
  std::set<std::string> names;
  for (const Json& t : tensors) {
    if (t.is_object()) names.insert(StringField(t, "name"));
  }
  return names;
}

// A queue policy that delays requests past their timeout.
bool Delays(const Json& policy) {
  return policy.is_object() && IntegerField(policy, "default_timeout_microseconds") != 0 &&
         StringField(policy, "timeout_action") == "DELAY";
}

// priority_queue_policy as (level, policy) pairs: text configs write the
// map as {key, value} entries, Triton's JSON as an object keyed by level.
std::vector<std::pair<int64_t, Json>> PriorityPolicies(const Json& batching) {
  std::vector<std::pair<int64_t, Json>> out;
  auto it = batching.find("priority_queue_policy");
  if (it == batching.end()) return out;
  if (it->is_object() && !it->contains("key")) {
    for (const auto& [level, policy] : it->items())
      out.emplace_back(OptionalIntegerOf(Json(level)).value_or(0), policy);
    return out;
  }
  for (const Json& entry : it->is_array() ? *it : Json::array({*it})) {
    if (!entry.is_object()) continue;
    out.emplace_back(IntegerField(entry, "key"), entry.contains("value") ? entry["value"] : Json::object());
  }
  return out;
}

class Rules {
 public:
  Rules(const Json& config, absl::string_view model, absl::string_view source)
      : config_(config), model_(model), source_(source) {}

  absl::Status Check() const {
    if (IntegerField(config_, "max_batch_size") < 0) {
      return Refuse("max_batch_size", "'max_batch_size' must be non-negative value for " + model_);
    }
    if (config_.contains("ensemble_scheduling") && StringField(config_, "platform") != "ensemble") {
      return Refuse("ensemble_scheduling",
                    "ensemble scheduling cannot be set for model '" + model_ + "' whose platform is not ensemble");
    }
    for (absl::Status s : {InstanceGroups(), DataTypes("input", "input"), DataTypes("output", "output"),
                           DynamicBatching(), SequenceControls(), BatchInputs(), BatchOutputs()}) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Refuse(const std::string& field, const std::string& text) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", field, ": ", text));
  }

  absl::Status InstanceGroups() const {
    const Json groups = ListOf(config_, "instance_group");
    for (size_t i = 0; i < groups.size(); ++i) {
      if (!groups[i].is_object()) continue;
      const std::string field = absl::StrCat("instance_group[", i, "]");
      // Triton names a group it was given no name for "<model>_<index>".
      const std::string name = StringField(groups[i], "name", absl::StrCat(model_, "_", i));
      const Json gpus = ListOf(groups[i], "gpus");
      if (StringField(groups[i], "kind") == "KIND_CPU" && !gpus.empty()) {
        return Refuse(field + ".gpus", "instance group " + name + " of model " + model_ +
                                           " has kind KIND_CPU but specifies one or more GPUs");
      }
      for (size_t g = 0; g < gpus.size(); ++g) {
        const std::optional<int64_t> id = OptionalIntegerOf(gpus[g]);
        if (id && *id < 0) {
          return Refuse(absl::StrCat(field, ".gpus[", g, "]"),
                        absl::StrCat("instance group ", name, " of model ", model_,
                                     " specifies invalid or unsupported gpu id ", *id,
                                     ". GPUs with at least the minimum required CUDA compute compatibility are "
                                     "this server's CUDA devices, numbered from 0"));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status DataTypes(const char* key, const std::string& kind) const {
    const Json tensors = ListOf(config_, key);
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (!tensors[i].is_object()) continue;
      if (StringField(tensors[i], "data_type", "TYPE_INVALID") == "TYPE_INVALID") {
        return Refuse(absl::StrCat(key, "[", i, "].data_type"),
                      "model " + kind + " '" + StringField(tensors[i], "name") + "' must specify 'data_type'");
      }
    }
    return absl::OkStatus();
  }

  absl::Status DynamicBatching() const {
    auto it = config_.find("dynamic_batching");
    if (it == config_.end() || !it->is_object()) return absl::OkStatus();
    const Json& batching = *it;
    const int64_t levels = IntegerField(batching, "priority_levels");
    const std::vector<std::pair<int64_t, Json>> policies = PriorityPolicies(batching);
    if (levels != 0) {
      const int64_t fallback = IntegerField(batching, "default_priority_level");
      const std::string range = absl::StrCat("[1, ", levels, "] for ", model_);
      if (fallback == 0 || fallback > levels) {
        return Refuse("dynamic_batching.default_priority_level", "default priority level must be in range " + range);
      }
      for (const auto& [level, policy] : policies) {
        if (level == 0 || level > levels) {
          return Refuse("dynamic_batching.priority_queue_policy",
                        "priority queue policy must have priority level in range " + range);
        }
      }
    }
    if (IsTrue(batching, "preserve_ordering")) {
      const std::string field = "dynamic_batching.preserve_ordering";
      if (levels > 1) {
        return Refuse(field, "Only one priority level is allowed when 'preserve_ordering' is true for " + model_);
      }
      bool delays = batching.contains("default_queue_policy") && Delays(batching["default_queue_policy"]);
      for (const auto& [level, policy] : policies) delays = delays || Delays(policy);
      if (delays) {
        return Refuse(
            field, "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for " + model_);
      }
    }
    return absl::OkStatus();
  }

  // Each boolean control (start, end, ready) named by one tensor at most,
  // with its false and true values; no tensor named for two controls.
  absl::Status SequenceControls() const {
    auto it = config_.find("sequence_batching");
    if (it == config_.end() || !it->is_object()) return absl::OkStatus();
    const Json inputs = ListOf(*it, "control_input");
    for (const char* kind : {"CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_READY"}) {
      std::set<std::string> tensors;
      bool seen = false;
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (!inputs[i].is_object()) continue;
        const std::string field = absl::StrCat("sequence_batching.control_input[", i, "]");
        const std::string name = StringField(inputs[i], "name");
        if (name.empty()) return Refuse(field, "sequence batching control tensor must have a name for " + model_);
        if (!tensors.insert(name).second) {
          return Refuse(field, "sequence batching control tensor '" + name +
                                   "' is specified for multiple control kinds for " + model_);
        }
        for (const Json& control : ListOf(inputs[i], "control")) {
          if (!control.is_object() || StringField(control, "kind", "CONTROL_SEQUENCE_START") != kind) continue;
          if (seen) {
            return Refuse(field, absl::StrCat("sequence batching specifies multiple ", kind, " tensors for ", model_));
          }
          seen = true;
          int given = 0;
          for (const char* values : {"int32_false_true", "fp32_false_true", "bool_false_true"}) {
            given += !ListOf(control, values).empty();
          }
          if (given == 0) {
            return Refuse(field, absl::StrCat("sequence batching must specify either 'int32_false_true', "
                                              "'fp32_false_true' or 'bool_false_true' for ",
                                              kind, " for ", model_));
          }
          if (given > 1) {
            return Refuse(field, absl::StrCat("sequence batching specifies more than one of 'int32_false_true', "
                                              "'fp32_false_true' and 'bool_false_true' for ",
                                              kind, " for ", model_));
          }
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status BatchInputs() const {
    static const std::set<std::string> kOneSource = {"BATCH_ELEMENT_COUNT",
                                                     "BATCH_ACCUMULATED_ELEMENT_COUNT",
                                                     "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO",
                                                     "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE",
                                                     "BATCH_ITEM_SHAPE",
                                                     "BATCH_ITEM_SHAPE_FLATTEN"};
    const std::set<std::string> inputs = NamesOf(ListOf(config_, "input"));
    const Json batch = ListOf(config_, "batch_input");
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!batch[i].is_object()) continue;
      const std::string field = absl::StrCat("batch_input[", i, "]");
      const std::string kind = StringField(batch[i], "kind", "BATCH_ELEMENT_COUNT");
      if (!kOneSource.count(kind)) return Refuse(field + ".kind", "unknown batch input kind '" + kind + "'");
      const Json sources = ListOf(batch[i], "source_input");
      if (sources.size() != 1) {
        return Refuse(field + ".source_input",
                      absl::StrCat("batch input kind '", kind, "' expects 1 source input, got ", sources.size()));
      }
      const std::string type = StringField(batch[i], "data_type", "TYPE_INVALID");
      if (type != "TYPE_INT32" && type != "TYPE_FP32") {
        return Refuse(field + ".data_type", "batch input data type must be TYPE_INT32 or TYPE_FP32");
      }
      RETURN_IF_ERROR(KnownSources(sources, field, inputs));
    }
    return absl::OkStatus();
  }

  absl::Status BatchOutputs() const {
    const std::set<std::string> inputs = NamesOf(ListOf(config_, "input"));
    const std::set<std::string> outputs = NamesOf(ListOf(config_, "output"));
    const Json batch = ListOf(config_, "batch_output");
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!batch[i].is_object()) continue;
      const std::string field = absl::StrCat("batch_output[", i, "]");
      const std::string kind = StringField(batch[i], "kind", "BATCH_SCATTER_WITH_INPUT_SHAPE");
      if (kind != "BATCH_SCATTER_WITH_INPUT_SHAPE") {
        return Refuse(field + ".kind", "unknown batch output kind '" + kind + "'");
      }
      const Json sources = ListOf(batch[i], "source_input");
      if (sources.size() != 1) {
        return Refuse(field + ".source_input",
                      absl::StrCat("batch output kind '", kind, "' expects 1 source input, got ", sources.size()));
      }
      RETURN_IF_ERROR(KnownSources(sources, field, inputs));
      std::set<std::string> targets;
      for (const Json& target : ListOf(batch[i], "target_name")) {
        const std::string name = target.is_string() ? target.get<std::string>() : "";
        if (!outputs.count(name)) return Refuse(field + ".target_name", "unknown target output name '" + name + "'");
        if (!targets.insert(name).second) {
          return Refuse(field + ".target_name", "target output name '" + name + "' can only be specified once");
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status KnownSources(const Json& sources, const std::string& field, const std::set<std::string>& inputs) const {
    for (const Json& source : sources) {
      const std::string name = source.is_string() ? source.get<std::string>() : "";
      if (!inputs.count(name)) return Refuse(field + ".source_input", "unknown source input name '" + name + "'");
    }
    return absl::OkStatus();
  }

  const Json& config_;
  const std::string model_;
  const absl::string_view source_;
};

}  // namespace

absl::Status CheckTritonGpuIds(const nlohmann::json& config, absl::string_view model, absl::string_view source,
                               const std::vector<int64_t>& cuda_indices) {
  if (!config.is_object()) return absl::OkStatus();
  const Json groups = ListOf(config, "instance_group");
  for (size_t i = 0; i < groups.size(); ++i) {
    if (!groups[i].is_object()) continue;
    const Json gpus = ListOf(groups[i], "gpus");
    for (size_t g = 0; g < gpus.size(); ++g) {
      const std::optional<int64_t> id = OptionalIntegerOf(gpus[g]);
      if (!id || std::find(cuda_indices.begin(), cuda_indices.end(), *id) != cuda_indices.end()) continue;
      std::vector<std::string> present;
      for (int64_t n : cuda_indices) present.push_back(std::to_string(n));
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": instance_group[", i, "].gpus[", g, "]: instance group ",
                       StringField(groups[i], "name", absl::StrCat(model, "_", i)), " of model ", model,
                       " specifies invalid or unsupported gpu id ", *id,
                       ". GPUs with at least the minimum required CUDA compute compatibility are: ",
                       present.empty() ? "(none: this server has no CUDA device)" : absl::StrJoin(present, ", ")));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTritonRules(const nlohmann::json& config, absl::string_view model, absl::string_view source) {
  if (!config.is_object()) return absl::OkStatus();  // the reader refuses it, saying why
  return Rules(config, model, source).Check();
}

}  // namespace infergate
