#include "service/open_inference/triton_model_config.h"

#include "common/status_macros.h"
#include "google/protobuf/text_format.h"
#include "scheduler/repository/triton/triton_config.h"
#include "service/http/json_scan.h"

namespace infergate {

absl::StatusOr<ConfigOverride> ConfigOverrideFromTritonJson(absl::string_view json, absl::string_view model) {
  ASSIGN_OR_RETURN(nlohmann::json parsed, ParseBoundedJson(json, "parameters.config"));
  return ReadTritonConfig(parsed, model, "parameters.config");
}

bool ReadTritonFields(const std::string& text, inference::ModelConfig* config) {
  google::protobuf::TextFormat::Parser parser;
  parser.AllowUnknownField(true);
  config->Clear();
  return parser.ParseFromString(text, config);
}

}  // namespace infergate
