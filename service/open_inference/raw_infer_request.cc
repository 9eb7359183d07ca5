#include "service/open_inference/raw_infer_request.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/wire_strings.h"
#include "service/open_inference/open_inference_datatype.h"

namespace infergate {
namespace {

// The protocol's datatype name for a model-config enum: TYPE_FP32 is
// "FP32", TYPE_STRING "BYTES".
absl::StatusOr<std::string> WireDatatype(inference::DataType type, const std::string& input) {
  if (type == inference::TYPE_STRING) return std::string("BYTES");
  const std::string& name = inference::DataType_Name(type);
  if (type == inference::TYPE_INVALID || !absl::StartsWith(name, "TYPE_")) {
    return absl::InvalidArgumentError(
        absl::StrCat("the raw input '", input, "' has no datatype in the model's configuration"));
  }
  return name.substr(5);
}

}  // namespace

absl::StatusOr<RestInferRequest> ParseRawInferRequest(absl::string_view body, const inference::ModelConfig& config,
                                                      const std::string& model, const std::string& version) {
  if (config.input_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Raw request must only have 1 input (found 1) to be deduced but got ", config.input_size(),
                     " inputs in '", model, "' model configuration",
                     config.input_size() == 0 ? " (the raw form takes its input's name, datatype and shape from the "
                                                "configuration, and this one declares none: send JSON)"
                                              : ""));
  }
  const inference::ModelInput& input = config.input(0);
  ASSIGN_OR_RETURN(const std::string datatype, WireDatatype(input.data_type(), input.name()));
  std::vector<int64_t> shape;
  if (config.max_batch_size() != 0) shape.push_back(1);
  std::optional<size_t> variable_axis;
  uint64_t fixed_elements = 1;
  for (int64_t dim : input.dims()) {
    if (dim < 0) {
      if (variable_axis) {
        return absl::InvalidArgumentError(absl::StrCat("The shape of the raw input '", input.name(),
                                                       "' can not be deduced because there are more than one "
                                                       "variable-sized dimension"));
      }
      variable_axis = shape.size();
    } else if (dim > 0 && fixed_elements > UINT64_MAX / static_cast<uint64_t>(dim)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the raw input '", input.name(), "': its configured dims overflow an element count"));
    } else {
      fixed_elements *= static_cast<uint64_t>(dim);
    }
    shape.push_back(dim);
  }

  RestInferRequest out;
  inference::ModelInferRequest& req = out.request;
  req.set_model_name(model);
  req.set_model_version(version);
  std::string* bytes = req.add_raw_input_contents();
  if (datatype == "BYTES") {
    if (variable_axis || fixed_elements != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("For BYTE datatype raw input '", input.name(), "', the model must have input shape [1]"));
    }
    if (body.size() > UINT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat("the raw input '", input.name(), "' is ", body.size(), " bytes; a string holds at most 4 GiB"));
    }
    // The protocol's binary form of a string: its length, then its bytes.
    bytes->reserve(4 + body.size());
    AppendSerializedString(body, bytes);
  } else {
    if (variable_axis) {
      std::optional<DType> dtype = KnownDatatype(datatype);
      if (!dtype) {
        return absl::InvalidArgumentError(
            absl::StrCat("the raw input '", input.name(), "' has datatype ", datatype, ", which is not served"));
      }
      const uint64_t row = fixed_elements * ElementSize(*dtype);
      shape[*variable_axis] = row == 0 ? 0 : static_cast<int64_t>(body.size() / row);
    }
    bytes->assign(body.data(), body.size());
  }
  inference::ModelInferRequest::InferInputTensor* tensor = req.add_inputs();
  tensor->set_name(input.name());
  tensor->set_datatype(datatype);
  for (int64_t d : shape) tensor->add_shape(d);
  out.all_outputs_binary = true;
  return out;
}

}  // namespace infergate
