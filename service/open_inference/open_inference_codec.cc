#include "service/open_inference/open_inference_codec.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <limits>
#include <string_view>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "devices/torch_dtype.h"
#include "scheduler/model/string_tensor.h"
#include "scheduler/repository/class_labels.h"
#include "service/call/classification.h"
#include "service/call/tensor_codec.h"

namespace infergate {
namespace {

using Parameters = google::protobuf::Map<std::string, inference::InferParameter>;

absl::StatusOr<std::string> StringParameter(const Parameters& params, const std::string& key) {
  auto it = params.find(key);
  if (it == params.end()) return std::string();
  if (it->second.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return absl::InvalidArgumentError(absl::StrCat("parameters.", key, ": expected a string"));
  }
  return it->second.string_param();
}

// A non-negative integer parameter (int64 or uint64, as clients send
// either); 0 when absent.
absl::StatusOr<uint64_t> UnsignedParameter(const Parameters& params, const std::string& key) {
  auto it = params.find(key);
  if (it == params.end()) return 0;
  switch (it->second.parameter_choice_case()) {
    case inference::InferParameter::kUint64Param: return it->second.uint64_param();
    case inference::InferParameter::kInt64Param:
      if (it->second.int64_param() >= 0) return static_cast<uint64_t>(it->second.int64_param());
      break;
    default: break;
  }
  return absl::InvalidArgumentError(absl::StrCat("parameters.", key, ": expected a non-negative integer"));
}

// Copies typed `values` into a new tensor of `dtype` whose C++ element type
// is `Element`, checking that each value fits.
template <typename Element, typename Values>
absl::StatusOr<at::Tensor> FromTyped(const Values& values, DType dtype, const std::vector<int64_t>& shape,
                                     int64_t elements, const std::string& field, const char* contents_field) {
  if (values.size() != elements) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".contents.", contents_field, ": holds ", values.size(),
                                                   " values but shape [", absl::StrJoin(shape, ","), "] needs ",
                                                   elements));
  }
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(ToScalarType(dtype)));
  Element* data = t.data_ptr<Element>();
  for (int64_t i = 0; i < elements; ++i) {
    auto v = values.Get(static_cast<int>(i));
    if constexpr (std::is_integral_v<Element> && !std::is_same_v<Element, bool> && sizeof(Element) < 8) {
      const int64_t wide = static_cast<int64_t>(v);
      if (wide < std::numeric_limits<Element>::min() || wide > std::numeric_limits<Element>::max()) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".contents.", contents_field, "[", i, "]: ", v, " does not fit ", DatatypeName(dtype)));
      }
    }
    data[i] = static_cast<Element>(v);
  }
  return t;
}

absl::StatusOr<at::Tensor> DecodeTyped(const inference::InferTensorContents& c, DType dtype,
                                       const std::vector<int64_t>& shape, int64_t elements, const std::string& field) {
  switch (dtype) {
    case DType::kBool: return FromTyped<bool>(c.bool_contents(), dtype, shape, elements, field, "bool_contents");
    case DType::kUInt8: return FromTyped<uint8_t>(c.uint_contents(), dtype, shape, elements, field, "uint_contents");
    case DType::kInt8: return FromTyped<int8_t>(c.int_contents(), dtype, shape, elements, field, "int_contents");
    case DType::kInt16: return FromTyped<int16_t>(c.int_contents(), dtype, shape, elements, field, "int_contents");
    case DType::kInt32: return FromTyped<int32_t>(c.int_contents(), dtype, shape, elements, field, "int_contents");
    case DType::kInt64: return FromTyped<int64_t>(c.int64_contents(), dtype, shape, elements, field, "int64_contents");
    case DType::kFloat32: return FromTyped<float>(c.fp32_contents(), dtype, shape, elements, field, "fp32_contents");
    case DType::kFloat64: return FromTyped<double>(c.fp64_contents(), dtype, shape, elements, field, "fp64_contents");
    case DType::kBytes: {
      if (c.bytes_contents_size() != elements) {
        return absl::InvalidArgumentError(absl::StrCat(field, ".contents.bytes_contents: holds ",
                                                       c.bytes_contents_size(), " values but shape [",
                                                       absl::StrJoin(shape, ","), "] needs ", elements));
      }
      std::vector<absl::string_view> strings(c.bytes_contents().begin(), c.bytes_contents().end());
      return StringTensorOver(std::move(strings), shape);
    }
    case DType::kFloat16:
    case DType::kBFloat16: break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ".contents: ", DatatypeName(dtype), " travels only as raw_input_contents"));
}

// Triton's words for raw contents that do not fit the input, then
// infergate's (`detail`: the field and why).
absl::Status RawContentsRefusal(const inference::ModelInferRequest& request, const std::string& input, DType dtype,
                                int64_t elements, size_t bytes, const absl::Status& detail) {
  const std::string where =
      absl::StrCat("input '", input.substr(0, 64), "' for model '", request.model_name().substr(0, 64), "'");
  std::string triton;
  if (dtype == DType::kBytes) {
    triton = absl::StrCat("expected ", elements, " string elements for inference ", where);
  } else if (bytes != static_cast<uint64_t>(elements) * ElementSize(dtype)) {
    triton = absl::StrCat("input byte size mismatch for ", where, ". Expected ",
                          static_cast<uint64_t>(elements) * ElementSize(dtype), ", got ", bytes);
  } else {
    return detail;  // BOOL bytes other than 0 and 1: infergate's own check
  }
  return absl::InvalidArgumentError(absl::StrCat(triton, " (", detail.message(), ")"));
}

bool HasTypedContents(const inference::InferTensorContents& c) {
  return c.bool_contents_size() || c.int_contents_size() || c.int64_contents_size() || c.uint_contents_size() ||
         c.uint64_contents_size() || c.fp32_contents_size() || c.fp64_contents_size() || c.bytes_contents_size();
}

void SetString(Parameters* params, const char* key, std::string value) {
  (*params)[key].set_string_param(std::move(value));
}
void SetInt(Parameters* params, const char* key, int64_t value) { (*params)[key].set_int64_param(value); }

// A bool parameter; false when absent.
absl::StatusOr<bool> BoolParameter(const Parameters& params, const std::string& key) {
  auto it = params.find(key);
  if (it == params.end()) return false;
  if (it->second.parameter_choice_case() != inference::InferParameter::kBoolParam) {
    return absl::InvalidArgumentError(absl::StrCat("parameters.", key, ": expected true or false"));
  }
  return it->second.bool_param();
}

// Triton's refusal of an input sent both raw and typed.
absl::Status TypedBesideRaw(const inference::ModelInferRequest& request, int i) {
  const std::string& name = request.inputs(i).name();
  // Triton's words first: clients match on them.
  return absl::InvalidArgumentError(
      absl::StrCat("contents field must not be specified when using raw_input_contents for '", name.substr(0, 64),
                   "' for model '", request.model_name().substr(0, 64), "' (inputs[", i,
                   "].contents: the request also has raw_input_contents; send each input one way only)"));
}

// The outputs asked for (each at most once: an output named K times would
// make the answer hold K copies of it, memory no budget accounts for), and
// no shared memory on either side.
absl::Status CheckRequestedOutputs(const inference::ModelInferRequest& request, const CodecLimits& limits) {
  RETURN_IF_ERROR(CheckTensorCount(request.outputs_size(), "outputs", limits));
  if (request.outputs_size() > 1) {
    // (std::unordered_map: Debian 13's absl hash tables do not compile
    // under GCC 14's UndefinedBehaviorSanitizer.)
    std::unordered_map<std::string_view, int> seen;
    for (int i = 0; i < request.outputs_size(); ++i) {
      auto [first, fresh] = seen.emplace(request.outputs(i).name(), i);
      if (!fresh) {
        // Triton's words first (its clients and tests match them).
        return absl::InvalidArgumentError(absl::StrCat("output '", request.outputs(i).name().substr(0, 64),
                                                       "' already exists in request (outputs[", i,
                                                       "].name: also requested by outputs[", first->second, "])"));
      }
    }
  }
  for (int i = 0; i < request.outputs_size(); ++i) {
    const Parameters& output_params = request.outputs(i).parameters();
    if (output_params.contains("shared_memory_region")) {
      return absl::UnimplementedError(
          absl::StrCat("outputs[", i,
                       "].parameters.shared_memory_region: shared memory is not supported; outputs come back in the "
                       "answer"));
    }
    if (absl::StatusOr<uint64_t> k = UnsignedParameter(output_params, "classification"); !k.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("outputs[", i, "].", k.status().message()));
    }
  }
  for (int i = 0; i < request.inputs_size(); ++i) {
    if (request.inputs(i).parameters().contains("shared_memory_region")) {
      return absl::UnimplementedError(
          absl::StrCat("inputs[", i,
                       "].parameters.shared_memory_region: shared memory is not supported; send the tensor in "
                       "raw_input_contents"));
    }
  }
  return absl::OkStatus();
}

// The request's parameters: infergate's device, precision and fallback,
// Triton's timeout and priority; timing is only checked here (it is read
// again when the answer is written, EncodeInferResponse).
absl::Status DecodeRequestParameters(const Parameters& params, InferenceRequest* out) {
  ASSIGN_OR_RETURN(out->device, StringParameter(params, "device"));
  ASSIGN_OR_RETURN(std::string precision, StringParameter(params, "precision"));
  std::optional<Precision> p = ParsePrecisionName(precision);
  if (!p) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameters.precision: '", precision.substr(0, 32), "'; expected AUTO, FP32, FP16 or BF16"));
  }
  out->precision = *p;
  ASSIGN_OR_RETURN(std::string fallback, StringParameter(params, "fallback"));
  std::string f = absl::AsciiStrToUpper(fallback);
  if (f != "" && f != "ALLOW" && f != "DENY") {
    return absl::InvalidArgumentError(
        absl::StrCat("parameters.fallback: '", fallback.substr(0, 32), "'; expected ALLOW or DENY"));
  }
  out->allow_fallback = f != "DENY";
  // Triton's request parameters: the queue timeout in microseconds (it may
  // shorten the model's default_queue_policy timeout) and the priority
  // level (1 the highest, 0 the model's default).
  ASSIGN_OR_RETURN(out->timeout_us, UnsignedParameter(params, "timeout"));
  ASSIGN_OR_RETURN(const uint64_t priority, UnsignedParameter(params, "priority"));
  if (priority > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("parameters.priority: ", priority, " is not a priority level"));
  }
  out->priority = static_cast<uint32_t>(priority);
  return BoolParameter(params, "timing").status();
}

// Raw contents, where sent, in Triton's order: an input that also has
// typed contents is named before the entries are counted (NVIDIA's
// explicit-content examples send one entry for two inputs and expect this).
absl::Status CheckRawLayout(const inference::ModelInferRequest& request) {
  if (request.raw_input_contents_size() == 0) return absl::OkStatus();
  for (int i = 0; i < request.inputs_size(); ++i) {
    const inference::ModelInferRequest::InferInputTensor& in = request.inputs(i);
    if (in.has_contents() && HasTypedContents(in.contents())) return TypedBesideRaw(request, i);
  }
  if (request.raw_input_contents_size() != request.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat("raw_input_contents: holds ", request.raw_input_contents_size(),
                                                   " entries for ", request.inputs_size(), " inputs"));
  }
  return absl::OkStatus();
}

// inputs[i] as a tensor: over its raw entry's bytes, or decoded from its
// typed contents. `strings`: the string elements of the inputs before it,
// which this one's are added to and checked against the limit.
absl::StatusOr<NamedTensor> DecodeInput(const inference::ModelInferRequest& request, int i, const CodecLimits& limits,
                                        int64_t* strings) {
  const inference::ModelInferRequest::InferInputTensor& in = request.inputs(i);
  std::string field = absl::StrCat("inputs[", i, "]");
  if (in.name().empty()) return absl::InvalidArgumentError(absl::StrCat(field, ".name: is empty"));
  std::optional<DType> dtype = KnownDatatype(in.datatype());
  if (!dtype) return DatatypeFromName(in.datatype(), absl::StrCat(field, ".datatype")).status();
  std::vector<int64_t> shape(in.shape().begin(), in.shape().end());
  ASSIGN_OR_RETURN(const int64_t elements, ValidateShape(shape, field, limits));
  if (*dtype == DType::kBytes) {
    *strings += elements;
    if (*strings > limits.max_string_elements) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": the request's string inputs hold ", *strings,
                                                     " elements by here, more than the server's limit of ",
                                                     limits.max_string_elements, " (--max-string-elements)"));
    }
  }
  if (request.raw_input_contents_size() == 0) {
    ASSIGN_OR_RETURN(at::Tensor t, DecodeTyped(in.contents(), *dtype, shape, elements, field));
    return NamedTensor{in.name(), std::move(t)};
  }
  const std::string& bytes = request.raw_input_contents(i);
  // The field name is only built for the error.
  const bool plainly_right = *dtype != DType::kBool && *dtype != DType::kBytes &&
                             bytes.size() == static_cast<uint64_t>(elements) * ElementSize(*dtype);
  if (!plainly_right) {
    if (absl::Status s = ValidateRawBytes(*dtype, elements, shape, bytes, absl::StrCat("raw_input_contents[", i, "]"));
        !s.ok()) {
      return RawContentsRefusal(request, in.name(), *dtype, elements, bytes.size(), s);
    }
  }
  return NamedTensor{in.name(), TensorOverBytes(*dtype, shape, bytes)};
}

}  // namespace

absl::Status DecodeInferRequest(const inference::ModelInferRequest& request, const CodecLimits& limits,
                                InferenceRequest* out) {
  RETURN_IF_ERROR(CheckTensorCount(request.inputs_size(), "inputs", limits));
  RETURN_IF_ERROR(CheckRequestedOutputs(request, limits));
  out->model = request.model_name();
  out->version = request.model_version();
  RETURN_IF_ERROR(DecodeRequestParameters(request.parameters(), out));
  RETURN_IF_ERROR(CheckRawLayout(request));
  int64_t strings = 0;  // string elements so far, all inputs together
  out->inputs.clear();
  out->inputs.reserve(request.inputs_size());
  for (int i = 0; i < request.inputs_size(); ++i) {
    ASSIGN_OR_RETURN(NamedTensor input, DecodeInput(request, i, limits, &strings));
    out->inputs.push_back(std::move(input));
  }
  return absl::OkStatus();
}

uint64_t MaxClassCount(const inference::ModelInferRequest& request) {
  uint64_t most = 0;
  for (const auto& output : request.outputs()) {
    absl::StatusOr<uint64_t> k = UnsignedParameter(output.parameters(), "classification");
    if (k.ok()) most = std::max(most, *k);
  }
  return most;
}

absl::Status EncodeInferResponse(const inference::ModelInferRequest& request, InferenceResult& result,
                                 inference::ModelInferResponse* response) {
  std::vector<const NamedTensor*> chosen;
  std::vector<uint64_t> class_counts;  // per chosen output; 0: the tensor itself
  if (request.outputs_size() == 0) {
    for (const NamedTensor& t : result.outputs) chosen.push_back(&t);
    class_counts.assign(chosen.size(), 0);
  } else {
    for (int i = 0; i < request.outputs_size(); ++i) {
      const std::string& name = request.outputs(i).name();
      auto it = std::find_if(result.outputs.begin(), result.outputs.end(),
                             [&](const NamedTensor& t) { return t.name == name; });
      if (it == result.outputs.end()) {
        std::vector<std::string> names;
        for (const NamedTensor& t : result.outputs) names.push_back(t.name);
        return absl::InvalidArgumentError(absl::StrCat("outputs[", i, "].name: model '", request.model_name(),
                                                       "' has no output '", name.substr(0, 64), "' (it has ",
                                                       absl::StrJoin(names, ", "), ")"));
      }
      chosen.push_back(&*it);
      absl::StatusOr<uint64_t> k = UnsignedParameter(request.outputs(i).parameters(), "classification");
      class_counts.push_back(k.ok() ? *k : 0);  // checked when decoded
    }
  }
  response->set_model_name(request.model_name());
  response->set_model_version(absl::StrCat(result.placement.model_version));
  response->set_id(request.id());
  for (size_t c = 0; c < chosen.size(); ++c) {
    const NamedTensor* t = chosen[c];
    if (class_counts[c] > 0) {
      ASSIGN_OR_RETURN(
          std::vector<std::vector<ClassScore>> classes,
          TopClasses(t->tensor, result.batched, class_counts[c], result.labels ? result.labels->For(t->name) : nullptr,
                     absl::StrCat("outputs[", c, "].parameters.classification")));
      ClassBytes bytes = ClassesAsBytes(classes, result.batched);
      *response->add_raw_output_contents() = std::move(bytes.raw);
      inference::ModelInferResponse::InferOutputTensor* out = response->add_outputs();
      out->set_name(t->name);
      out->set_datatype("BYTES");
      for (int64_t d : bytes.shape) out->add_shape(d);
      continue;
    }
    std::string* bytes = response->add_raw_output_contents();
    ASSIGN_OR_RETURN(DType dtype, TensorBytes(t->tensor, t->name, bytes));
    inference::ModelInferResponse::InferOutputTensor* out = response->add_outputs();
    out->set_name(t->name);
    out->set_datatype(std::string(DatatypeName(dtype)));
    for (int64_t d : t->tensor.sizes()) out->add_shape(d);
  }
  // The placement: where it ran and in what dtype, always (a client judges
  // an FP16 answer by its dtype). Entries that only restate a default (no
  // device asked for, no fallback) are left out, and the timings come only
  // when asked for: every map entry costs both sides an allocation, about
  // one per cent of a small model's request rate each. The served version
  // is the answer's own model_version.
  const Placement& p = result.placement;
  Parameters* params = response->mutable_parameters();
  SetString(params, "device", p.device);
  SetString(params, "dtype", std::string(DatatypeName(p.dtype)));
  if (!p.requested_device.empty()) SetString(params, "requested_device", p.requested_device);
  if (p.fell_back) {
    (*params)["fell_back"].set_bool_param(true);
    SetString(params, "fallback_reason", p.fallback_reason);
  }
  if (!p.precision_reason.empty()) SetString(params, "precision_reason", p.precision_reason);
  if (absl::StatusOr<bool> timing = BoolParameter(request.parameters(), "timing"); timing.ok() && *timing) {
    SetInt(params, "batch_size", p.batch_size);
    SetInt(params, "queue_us", static_cast<int64_t>(result.timing.queue_us));
    SetInt(params, "compute_us", static_cast<int64_t>(result.timing.compute_us));
    if (!p.ready_path.empty()) {
      SetString(params, "ready_path", p.ready_path);
      SetInt(params, "ready_path_expected_us", static_cast<int64_t>(p.ready_path_expected_us));
      if (p.ready_path_load_us > 0) SetInt(params, "ready_path_load_us", static_cast<int64_t>(p.ready_path_load_us));
    }
    if (result.timing.load_wait_us > 0) {
      SetInt(params, "load_wait_us", static_cast<int64_t>(result.timing.load_wait_us));
    }
  }
  return absl::OkStatus();
}

}  // namespace infergate
