#include "scheduler/repository/config_override.h"

#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/message_differencer.h"

namespace infergate {

bool ConfigOverride::operator==(const ConfigOverride& other) const {
  return fields == other.fields && google::protobuf::util::MessageDifferencer::Equals(values, other.values);
}

v1::ModelConfig ApplyConfigOverride(const v1::ModelConfig& base, const ConfigOverride& patch) {
  v1::ModelConfig out = base;
  v1::ModelConfig values = patch.values;
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  for (const std::string& name : patch.fields) {
    if (const google::protobuf::FieldDescriptor* f = v1::ModelConfig::descriptor()->FindFieldByName(name)) {
      fields.push_back(f);
    }
  }
  // Each named field, set or repeated, moves whole from the patch.
  v1::ModelConfig::GetReflection()->SwapFields(&out, &values, fields);
  // The config in force is no longer the file as written.
  if (!fields.empty()) out.clear_triton_config_text();
  return out;
}

}  // namespace infergate
