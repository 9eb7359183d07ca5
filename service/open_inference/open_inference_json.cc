#include "service/open_inference/open_inference_json.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/client_text.h"
#include "common/status_macros.h"
#include "common/wire_strings.h"
#include "devices/half_float.h"
#include "service/call/numeric_json_data.h"
#include "service/http/json_scan.h"
#include "service/open_inference/open_inference_datatype.h"

namespace infergate {
namespace {

using Json = nlohmann::json;
using google::protobuf::FieldDescriptor;

constexpr bool kLittleEndian = std::endian::native == std::endian::little;
// Nested `data` deeper than this is refused before it is walked.
constexpr int kMaxDataDepth = 64;
static_assert(kMaxJsonDepth >= kMaxDataDepth + 4, "a body must be able to hold data nested kMaxDataDepth deep");

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Text for a JSON string, escaped (bytes that are not UTF-8 become U+FFFD).
// Names and datatypes are printable ASCII with nothing to escape: those go
// out as they are (an answer quotes four or more, and the JSON library's
// copy-and-dump was 2% of a small REST call's CPU); anything else, the
// library escapes, so the bytes are the same either way.
std::string Quote(absl::string_view text) {
  const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
    return c >= 0x20 && c != '"' && c != '\\' && static_cast<unsigned char>(c) < 0x7f;
  });
  if (!plain) return Json(std::string(text)).dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  out.append(text.data(), text.size());
  out.push_back('"');
  return out;
}

absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view what) { return ParseBoundedJson(text, what); }

// A settings or parameters body: blank (nothing to change: nullopt) or one
// JSON object; anything else is refused as "request body: `expected`".
absl::StatusOr<std::optional<Json>> ParseOptionalObject(absl::string_view body, absl::string_view expected) {
  if (body.find_first_not_of(" \t\r\n") == absl::string_view::npos) return std::nullopt;
  ASSIGN_OR_RETURN(Json parsed, ParseJson(body, "the request body"));
  if (!parsed.is_object()) return Invalid("request body", expected);
  return parsed;
}

template <typename T>
void StoreLittleEndian(T value, char* out) {
  std::memcpy(out, &value, sizeof(T));
  if constexpr (!kLittleEndian) std::reverse(out, out + sizeof(T));
}

template <typename T>
T LoadLittleEndian(const char* in) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, in, sizeof(T));
  if constexpr (!kLittleEndian) std::reverse(bytes, bytes + sizeof(T));
  T value;
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

// Writes one JSON scalar as element `index` of `dtype` into `out`.
absl::Status StoreElement(const Json& v, DType dtype, size_t index, const std::string& field, char* out) {
  auto where = [&] { return absl::StrCat(field, "[", index, "]"); };
  char* at = out + index * ElementSize(dtype);
  if (dtype == DType::kBool) {
    if (!v.is_boolean()) return Invalid(where(), "expected true or false for BOOL");
    *at = v.get<bool>() ? 1 : 0;
    return absl::OkStatus();
  }
  if (dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 || dtype == DType::kBFloat16) {
    if (!v.is_number()) return Invalid(where(), absl::StrCat("expected a number for ", DatatypeName(dtype)));
    const double d = v.get<double>();
    switch (dtype) {
      case DType::kFloat64: StoreLittleEndian<double>(d, at); break;
      case DType::kFloat32: StoreLittleEndian<float>(static_cast<float>(d), at); break;
      case DType::kFloat16: StoreLittleEndian<uint16_t>(FloatToHalf(static_cast<float>(d)), at); break;
      default: StoreLittleEndian<uint16_t>(FloatToBFloat16(static_cast<float>(d)), at); break;
    }
    return absl::OkStatus();
  }
  if (!v.is_number_integer()) return Invalid(where(), absl::StrCat("expected an integer for ", DatatypeName(dtype)));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Invalid(where(), absl::StrCat(v.get<uint64_t>(), " does not fit ", DatatypeName(dtype)));
  }
  const int64_t i = v.get<int64_t>();
  auto fits = [&](int64_t lo, int64_t hi) { return i >= lo && i <= hi; };
  switch (dtype) {
    case DType::kInt64: StoreLittleEndian<int64_t>(i, at); return absl::OkStatus();
    case DType::kInt32:
      if (!fits(INT32_MIN, INT32_MAX)) break;
      StoreLittleEndian<int32_t>(static_cast<int32_t>(i), at);
      return absl::OkStatus();
    case DType::kInt16:
      if (!fits(INT16_MIN, INT16_MAX)) break;
      StoreLittleEndian<int16_t>(static_cast<int16_t>(i), at);
      return absl::OkStatus();
    case DType::kInt8:
      if (!fits(INT8_MIN, INT8_MAX)) break;
      *at = static_cast<char>(static_cast<int8_t>(i));
      return absl::OkStatus();
    case DType::kUInt8:
      if (!fits(0, UINT8_MAX)) break;
      *at = static_cast<char>(static_cast<uint8_t>(i));
      return absl::OkStatus();
    default: break;
  }
  return Invalid(where(), absl::StrCat(i, " does not fit ", DatatypeName(dtype)));
}

// Calls `visit(value)` for each value of `data` (a JSON value, or nested
// arrays of them) in row-major order, and stops at the first error it
// returns. An explicit stack: nesting is bounded, and no recursion on
// client input.
template <typename Visit>
absl::Status ForEachValue(const Json& data, const std::string& field, Visit visit) {
  if (!data.is_array()) return visit(data);
  struct Frame {
    const Json* array;
    size_t index;
  };
  std::vector<Frame> stack;
  stack.push_back({&data, 0});
  while (!stack.empty()) {
    Frame& top = stack.back();
    if (top.index == top.array->size()) {
      stack.pop_back();
      continue;
    }
    const Json& v = (*top.array)[top.index++];
    if (v.is_array()) {
      if (stack.size() >= kMaxDataDepth) return Invalid(field, "nested deeper than any tensor's rank");
      stack.push_back({&v, 0});
      continue;
    }
    RETURN_IF_ERROR(visit(v));
  }
  return absl::OkStatus();
}

// Stores `data`'s strings into `out` in BYTES' serialized form (each a
// 4-byte length, then its bytes), sized first.
absl::Status StoreStrings(const Json& data, const std::string& field, std::string* out) {
  size_t index = 0;
  uint64_t size = 0;
  absl::Status sized = ForEachValue(data, field, [&](const Json& v) {
    if (!v.is_string()) return Invalid(absl::StrCat(field, "[", index, "]"), "expected a string for BYTES");
    ++index;
    size += 4 + v.get_ref<const std::string&>().size();
    return absl::OkStatus();
  });
  if (!sized.ok()) return sized;
  out->clear();
  out->reserve(size);
  return ForEachValue(data, field, [&](const Json& v) {
    AppendSerializedString(v.get_ref<const std::string&>(), out);
    return absl::OkStatus();
  });
}

// Stores `data`'s values into `out` as `dtype`. The values are counted
// against the shape's `elements` first, and only then is memory taken: a
// shape that claims more values than `data` holds costs nothing (a 74-byte
// request once zero-filled 2 GiB for its shape).
absl::Status StoreData(const Json& data, DType dtype, int64_t elements, const std::string& field, std::string* out) {
  if (!data.is_array() && elements != 1) return Invalid(field, "expected an array");
  int64_t count = 0;
  absl::Status counted = ForEachValue(data, field, [&](const Json&) {
    if (++count > elements) {
      return Invalid(field, absl::StrCat("holds more than the ", elements, " values its shape needs"));
    }
    return absl::OkStatus();
  });
  if (!counted.ok()) return counted;
  if (count != elements) {
    return Invalid(field, absl::StrCat("holds ", count, " values but its shape needs ", elements));
  }
  if (dtype == DType::kBytes) return StoreStrings(data, field, out);
  out->resize(static_cast<size_t>(elements) * ElementSize(dtype));
  size_t next = 0;
  return ForEachValue(data, field, [&](const Json& v) { return StoreElement(v, dtype, next++, field, out->data()); });
}

absl::StatusOr<std::vector<int64_t>> ParseShape(const Json& input, const std::string& field) {
  auto it = input.find("shape");
  if (it == input.end()) return Invalid(field + ".shape", "is missing");
  if (!it->is_array()) return Invalid(field + ".shape", "expected an array of integers");
  if (it->size() > static_cast<size_t>(kMaxDataDepth)) return Invalid(field + ".shape", "has too many dimensions");
  std::vector<int64_t> shape;
  for (size_t d = 0; d < it->size(); ++d) {
    const Json& dim = (*it)[d];
    if (!dim.is_number_integer() || (dim.is_number_unsigned() && dim.get<uint64_t>() > INT64_MAX)) {
      return Invalid(absl::StrCat(field, ".shape[", d, "]"), "expected an integer");
    }
    if (dim.get<int64_t>() < 0) {
      // Triton's words first (it reads each dimension as unsigned).
      return absl::InvalidArgumentError(
          absl::StrCat("Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer (",
                       field, ".shape[", d, "]: ", dim.get<int64_t>(), " is negative)"));
    }
    shape.push_back(dim.get<int64_t>());
  }
  return shape;
}

// A JSON scalar as an InferParameter; INVALID_ARGUMENT for arrays, objects, null.
absl::Status SetParameter(const Json& v, const std::string& field, inference::InferParameter* out) {
  if (v.is_boolean()) {
    out->set_bool_param(v.get<bool>());
  } else if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    out->set_uint64_param(v.get<uint64_t>());
  } else if (v.is_number_integer()) {
    out->set_int64_param(v.get<int64_t>());
  } else if (v.is_number_float()) {
    out->set_double_param(v.get<double>());
  } else if (v.is_string()) {
    out->set_string_param(v.get<std::string>());
  } else {
    return Invalid(field, "expected a string, number or boolean");
  }
  return absl::OkStatus();
}

// The `binary_data_size` of an input's parameters; nullopt when absent.
absl::StatusOr<std::optional<uint64_t>> BinaryDataSize(const Json& input, const std::string& field) {
  auto params = input.find("parameters");
  if (params == input.end()) return std::optional<uint64_t>();
  if (!params->is_object()) return Invalid(field + ".parameters", "expected an object");
  auto size = params->find("binary_data_size");
  if (size == params->end()) return std::optional<uint64_t>();
  if (!size->is_number_integer() || (!size->is_number_unsigned() && size->get<int64_t>() < 0)) {
    return Invalid(field + ".parameters.binary_data_size", "expected a non-negative integer");
  }
  return std::optional<uint64_t>(size->get<uint64_t>());
}

absl::StatusOr<std::string> StringField(const Json& object, const char* key, const std::string& field, bool required) {
  auto it = object.find(key);
  if (it == object.end()) {
    if (required) return Invalid(absl::StrCat(field, key), "is missing");
    return std::string();
  }
  if (!it->is_string()) return Invalid(absl::StrCat(field, key), "expected a string");
  return it->get<std::string>();
}

// Appends the JSON number for one element of `dtype` at `at`.
void AppendElement(DType dtype, const char* at, std::string* out) {
  char buf[64];
  auto append_float = [&](double v, bool single) {
    if (!std::isfinite(v)) {
      out->append("null");  // JSON has no NaN or infinity
      return;
    }
    std::to_chars_result r = single ? std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v))
                                    : std::to_chars(buf, buf + sizeof(buf), v);
    out->append(buf, r.ptr);
  };
  auto append_int = [&](int64_t v) {
    std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v);
    out->append(buf, r.ptr);
  };
  switch (dtype) {
    case DType::kBool: out->append(*at ? "true" : "false"); break;
    case DType::kUInt8: append_int(static_cast<uint8_t>(*at)); break;
    case DType::kInt8: append_int(static_cast<int8_t>(*at)); break;
    case DType::kInt16: append_int(LoadLittleEndian<int16_t>(at)); break;
    case DType::kInt32: append_int(LoadLittleEndian<int32_t>(at)); break;
    case DType::kInt64: append_int(LoadLittleEndian<int64_t>(at)); break;
    case DType::kFloat16: append_float(HalfToFloat(LoadLittleEndian<uint16_t>(at)), true); break;
    case DType::kBFloat16: append_float(BFloat16ToFloat(LoadLittleEndian<uint16_t>(at)), true); break;
    case DType::kFloat32: append_float(LoadLittleEndian<float>(at), true); break;
    case DType::kFloat64: append_float(LoadLittleEndian<double>(at), false); break;
    case DType::kBytes: break;  // strings are written by WriteRestInferResponse
  }
}

void AppendParameter(const inference::InferParameter& p, std::string* out) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam: out->append(p.bool_param() ? "true" : "false"); break;
    case inference::InferParameter::kInt64Param: absl::StrAppend(out, p.int64_param()); break;
    case inference::InferParameter::kUint64Param: absl::StrAppend(out, p.uint64_param()); break;
    case inference::InferParameter::kDoubleParam: out->append(Json(p.double_param()).dump()); break;
    case inference::InferParameter::kStringParam: out->append(Quote(p.string_param())); break;
    default: out->append("null"); break;
  }
}

Json FieldToJson(const google::protobuf::Message& m, const FieldDescriptor* f, int index);

Json MessageToJson(const google::protobuf::Message& m) {
  const google::protobuf::Reflection* r = m.GetReflection();
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  Json out = Json::object();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_map()) {
      Json map = Json::object();
      for (int k = 0; k < r->FieldSize(m, f); ++k) {
        const google::protobuf::Message& entry = r->GetRepeatedMessage(m, f, k);
        const FieldDescriptor* key = entry.GetDescriptor()->FindFieldByName("key");
        const FieldDescriptor* value = entry.GetDescriptor()->FindFieldByName("value");
        Json k_json = FieldToJson(entry, key, -1);
        Json v_json = FieldToJson(entry, value, -1);
        // The REST protocol's $parameters are plain JSON values, as in an
        // inference answer, not the gRPC oneof ({"string_param": ...}).
        if (value->message_type() == inference::InferParameter::descriptor() && v_json.is_object() &&
            v_json.size() == 1) {
          v_json = Json(v_json.begin().value());
        }
        map[k_json.is_string() ? k_json.get<std::string>() : k_json.dump()] = std::move(v_json);
      }
      out[f->name()] = std::move(map);
    } else if (f->is_repeated()) {
      Json list = Json::array();
      for (int k = 0; k < r->FieldSize(m, f); ++k) list.push_back(FieldToJson(m, f, k));
      out[f->name()] = std::move(list);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE || f->containing_oneof() != nullptr) {
      if (r->HasField(m, f)) out[f->name()] = FieldToJson(m, f, -1);
    } else {
      out[f->name()] = FieldToJson(m, f, -1);
    }
  }
  return out;
}

Json FieldToJson(const google::protobuf::Message& m, const FieldDescriptor* f, int index) {
  const google::protobuf::Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64: return rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32: return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64: return rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE: return rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT: return rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f);
    case FieldDescriptor::CPPTYPE_BOOL: return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM: return (rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f))->name();
    case FieldDescriptor::CPPTYPE_STRING: return rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageToJson(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return nullptr;
}

// The request's `parameters` into `out` (binary_data_output is the REST
// protocol's own, kept apart).
absl::Status DecodeRequestParameters(const Json& root, RestInferRequest* out) {
  auto params = root.find("parameters");
  if (params == root.end()) return absl::OkStatus();
  if (!params->is_object()) return Invalid("parameters", "expected an object");
  for (const auto& [key, value] : params->items()) {
    const std::string field = absl::StrCat("parameters.", key);
    if (key == "binary_data_output") {
      if (!value.is_boolean()) return Invalid(field, "expected true or false");
      out->all_outputs_binary = value.get<bool>();
      continue;
    }
    inference::InferParameter p;
    RETURN_IF_ERROR(SetParameter(value, field, &p));
    (*out->request.mutable_parameters())[key] = std::move(p);
  }
  return absl::OkStatus();
}

// What decoding one input came to: its bytes stored (from the binary part
// or the tree), stored straight from the body's text, or a numeric array
// the direct decoder declined, after which the whole body is decoded from
// its tree instead (so every answer is the tree's).
enum class InputDecoded { kStored, kStoredFromText, kUseTheTree };

// inputs[i] (`in`) appended to `req`. `binary` is what follows the JSON,
// of which `*binary_used` bytes went to earlier inputs; `numeric` the data
// arrays found in the text (null: decode from the tree).
absl::StatusOr<InputDecoded> DecodeInput(const Json& in, size_t i, absl::string_view binary, size_t* binary_used,
                                         const CodecLimits& limits, const NumericData* numeric,
                                         inference::ModelInferRequest* req) {
  const std::string field = absl::StrCat("inputs[", i, "]");
  if (!in.is_object()) return Invalid(field, "expected an object");
  ASSIGN_OR_RETURN(std::string name, StringField(in, "name", field + ".", true));
  ASSIGN_OR_RETURN(std::string datatype, StringField(in, "datatype", field + ".", true));
  ASSIGN_OR_RETURN(const DType dtype, DatatypeFromName(datatype, field + ".datatype"));
  ASSIGN_OR_RETURN(const std::vector<int64_t> shape, ParseShape(in, field));
  RETURN_IF_ERROR(CheckShapeFitsInt64(shape, ElementSize(dtype), name));
  ASSIGN_OR_RETURN(const int64_t elements, ValidateShape(shape, field, limits));
  ASSIGN_OR_RETURN(const std::optional<uint64_t> binary_size, BinaryDataSize(in, field));

  inference::ModelInferRequest::InferInputTensor* tensor = req->add_inputs();
  tensor->set_name(std::move(name));
  tensor->set_datatype(std::move(datatype));
  for (int64_t d : shape) tensor->add_shape(d);
  std::string* bytes = req->add_raw_input_contents();
  const bool has_data = in.contains("data");
  if (binary_size.has_value()) {
    if (has_data) return Invalid(field, "has both data and parameters.binary_data_size; send it one way");
    const uint64_t size = *binary_size;
    if (size > binary.size() - *binary_used) {
      return Invalid(field + ".parameters.binary_data_size",
                     absl::StrCat(size, " bytes, but only ", binary.size() - *binary_used,
                                  " bytes of binary data are left in the body"));
    }
    // The byte count against the shape is checked by the shared decoder.
    bytes->assign(binary.data() + *binary_used, size);
    *binary_used += size;
    return InputDecoded::kStored;
  }
  if (!has_data) return Invalid(field + ".data", "is missing (or set parameters.binary_data_size)");
  if (numeric != nullptr) {
    if (auto array = numeric->arrays.find(i); array != numeric->arrays.end()) {
      return DecodeNumericData(array->second, dtype, elements, bytes) ? InputDecoded::kStoredFromText
                                                                      : InputDecoded::kUseTheTree;
    }
  }
  RETURN_IF_ERROR(StoreData(in["data"], dtype, elements, field + ".data", bytes));
  return InputDecoded::kStored;
}

// The request's `outputs` into `out`: the names asked for, Triton's
// classification and shared-memory parameters, and which are binary.
absl::Status DecodeRequestedOutputs(const Json& root, const CodecLimits& limits, RestInferRequest* out) {
  auto outputs = root.find("outputs");
  if (outputs == root.end()) return absl::OkStatus();
  if (!outputs->is_array()) return Invalid("outputs", "expected an array");
  RETURN_IF_ERROR(CheckTensorCount(static_cast<int64_t>(outputs->size()), "outputs", limits));
  for (size_t i = 0; i < outputs->size(); ++i) {
    const Json& o = (*outputs)[i];
    const std::string field = absl::StrCat("outputs[", i, "]");
    if (!o.is_object()) return Invalid(field, "expected an object");
    ASSIGN_OR_RETURN(const std::string name, StringField(o, "name", field + ".", true));
    auto* requested = out->request.add_outputs();
    requested->set_name(name);
    auto params = o.find("parameters");
    if (params == o.end()) continue;
    if (!params->is_object()) return Invalid(field + ".parameters", "expected an object");
    // Triton's classification extension: the top k classes instead of the tensor.
    if (auto k = params->find("classification"); k != params->end()) {
      if (!k->is_number_unsigned() || k->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return Invalid(field + ".parameters.classification", "expected a non-negative integer");
      }
      (*requested->mutable_parameters())["classification"].set_int64_param(k->get<int64_t>());
    }
    if (params->contains("shared_memory_region")) {
      (*requested->mutable_parameters())["shared_memory_region"].set_string_param("");  // refused when decoded
    }
    auto binary_flag = params->find("binary_data");
    if (binary_flag == params->end()) continue;
    if (!binary_flag->is_boolean()) return Invalid(field + ".parameters.binary_data", "expected true or false");
    (binary_flag->get<bool>() ? out->binary_outputs : out->json_outputs).insert(name);
  }
  return absl::OkStatus();
}

// The request in `root` (the body's tree) and `binary` (what follows the
// JSON). `numeric`: the `data` arrays decoded from the text instead of the
// tree (whose `data` for them is a placeholder), or null. nullopt when the
// direct decoder declined one of them: the caller then decodes the whole
// body's tree (never with `numeric` null).
absl::StatusOr<std::optional<RestInferRequest>> DecodeRestInferRequest(const Json& root, absl::string_view binary,
                                                                       const std::string& model,
                                                                       const std::string& version,
                                                                       const CodecLimits& limits,
                                                                       const NumericData* numeric) {
  if (!root.is_object()) return Invalid("request body", "expected a JSON object");
  RestInferRequest out;
  inference::ModelInferRequest& req = out.request;
  req.set_model_name(model);
  req.set_model_version(version);
  ASSIGN_OR_RETURN(std::string id, StringField(root, "id", "", false));
  req.set_id(std::move(id));
  RETURN_IF_ERROR(DecodeRequestParameters(root, &out));

  auto inputs = root.find("inputs");
  if (inputs == root.end()) return Invalid("inputs", "is missing");
  if (!inputs->is_array()) return Invalid("inputs", "expected an array");
  RETURN_IF_ERROR(CheckTensorCount(static_cast<int64_t>(inputs->size()), "inputs", limits));
  size_t binary_used = 0;
  for (size_t i = 0; i < inputs->size(); ++i) {
    ASSIGN_OR_RETURN(const InputDecoded decoded,
                     DecodeInput((*inputs)[i], i, binary, &binary_used, limits, numeric, &req));
    if (decoded == InputDecoded::kUseTheTree) return std::nullopt;
    if (decoded == InputDecoded::kStoredFromText) ++out.inputs_decoded_from_text;
  }
  if (binary_used != binary.size()) {
    return Invalid("request body", absl::StrCat(binary.size() - binary_used,
                                                " bytes of binary data follow the JSON that no input's "
                                                "binary_data_size accounts for"));
  }
  RETURN_IF_ERROR(DecodeRequestedOutputs(root, limits, &out));
  return std::optional<RestInferRequest>(std::move(out));
}

}  // namespace

absl::StatusOr<RestInferRequest> ParseRestInferRequest(absl::string_view body, std::optional<uint64_t> json_length,
                                                       const std::string& model, const std::string& version,
                                                       const CodecLimits& limits, JsonDataDecoding decoding) {
  if (json_length && *json_length > body.size()) {
    return Invalid("Inference-Header-Content-Length",
                   absl::StrCat(*json_length, " is larger than the body (", body.size(), " bytes)"));
  }
  absl::string_view json_text = json_length ? body.substr(0, *json_length) : body;
  absl::string_view binary = json_length ? body.substr(*json_length) : absl::string_view();
  if (decoding == JsonDataDecoding::kDirect) {
    if (std::optional<NumericData> numeric = FindNumericData(json_text)) {
      // The tree of the rest. A body it refuses is parsed whole below, so
      // the error's offsets are those of the text the client sent.
      if (absl::StatusOr<Json> rest = ParseJson(numeric->body_without_arrays, "the request body"); rest.ok()) {
        absl::StatusOr<std::optional<RestInferRequest>> out =
            DecodeRestInferRequest(*rest, binary, model, version, limits, &*numeric);
        if (out.ok() && *out) return **std::move(out);
        // An error is the whole body's tree's to give: an array the walk
        // took may not be JSON, which only that parse reports.
      }
    }
  }
  ASSIGN_OR_RETURN(Json parsed, ParseJson(json_text, "the request body"));
  ASSIGN_OR_RETURN(std::optional<RestInferRequest> out,
                   DecodeRestInferRequest(parsed, binary, model, version, limits, /*numeric=*/nullptr));
  // Decoded from the tree alone, nothing is declined.
  if (!out) return absl::InternalError("the request body's tree declined to decode it");
  return *std::move(out);
}

absl::StatusOr<RestBody> WriteRestInferResponse(const inference::ModelInferResponse& response,
                                                const RestInferRequest& request) {
  std::string json;
  std::string binary;
  json.append("{\"model_name\":").append(Quote(response.model_name()));
  json.append(",\"model_version\":").append(Quote(response.model_version()));
  if (!response.id().empty()) json.append(",\"id\":").append(Quote(response.id()));
  if (!response.parameters().empty()) {
    json.append(",\"parameters\":{");
    bool first = true;
    // Sorted, so answers are stable whatever the map's order.
    std::map<std::string, const inference::InferParameter*> sorted;
    for (const auto& [key, value] : response.parameters()) sorted[key] = &value;
    for (const auto& [key, value] : sorted) {
      if (!first) json.push_back(',');
      first = false;
      json.append(Quote(key)).push_back(':');
      AppendParameter(*value, &json);
    }
    json.push_back('}');
  }
  json.append(",\"outputs\":[");
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& o = response.outputs(i);
    if (i >= response.raw_output_contents_size()) return absl::InternalError("an output has no raw contents");
    const std::string& raw = response.raw_output_contents(i);
    const bool bytes = o.datatype() == "BYTES";  // strings, and classification answers
    std::optional<DType> dtype = KnownDatatype(o.datatype());
    if (!dtype && !bytes)
      return absl::InternalError(absl::StrCat("output '", o.name(), "' has datatype ", o.datatype()));
    if (i > 0) json.push_back(',');
    json.append("{\"name\":").append(Quote(o.name()));
    json.append(",\"datatype\":").append(Quote(o.datatype()));
    json.append(",\"shape\":[");
    for (int d = 0; d < o.shape_size(); ++d) {
      if (d > 0) json.push_back(',');
      absl::StrAppend(&json, o.shape(d));
    }
    json.push_back(']');
    const bool as_binary = request.binary_outputs.count(o.name()) > 0 ||
                           (request.all_outputs_binary && request.json_outputs.count(o.name()) == 0);
    if (as_binary) {
      absl::StrAppend(&json, ",\"parameters\":{\"binary_data_size\":", raw.size(), "}}");
      binary.append(raw);
      continue;
    }
    json.append(",\"data\":[");
    if (bytes) {
      // Elements of a 4-byte little-endian length, then the bytes: as JSON strings.
      for (size_t at = 0; at + 4 <= raw.size();) {
        const auto* p = reinterpret_cast<const unsigned char*>(raw.data() + at);
        const size_t n = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<size_t>(p[3]) << 24);
        if (at + 4 + n > raw.size()) return absl::InternalError(absl::StrCat("output '", o.name(), "' is cut short"));
        if (at > 0) json.push_back(',');
        json.append(Quote(absl::string_view(raw.data() + at + 4, n)));
        at += 4 + n;
      }
      json.append("]}");
      continue;
    }
    const size_t width = ElementSize(*dtype);
    json.reserve(json.size() + raw.size() / width * 12);
    for (size_t at = 0; at + width <= raw.size(); at += width) {
      if (at > 0) json.push_back(',');
      AppendElement(*dtype, raw.data() + at, &json);
    }
    json.append("]}");
  }
  json.append("]}");
  RestBody out;
  if (!binary.empty() || request.all_outputs_binary || !request.binary_outputs.empty()) {
    out.json_length = json.size();
    out.body = std::move(json);
    out.body.append(binary);
  } else {
    out.body = std::move(json);
  }
  return out;
}

std::string ProtoToJson(const google::protobuf::Message& message) {
  return MessageToJson(message).dump(-1, ' ', false, Json::error_handler_t::replace);
}

absl::StatusOr<google::protobuf::Map<std::string, inference::ModelRepositoryParameter>> ParseRepositoryParameters(
    absl::string_view body) {
  google::protobuf::Map<std::string, inference::ModelRepositoryParameter> out;
  ASSIGN_OR_RETURN(std::optional<Json> parsed, ParseOptionalObject(body, "expected a JSON object"));
  if (!parsed) return out;
  auto params = parsed->find("parameters");
  if (params == parsed->end()) return out;
  if (!params->is_object()) return Invalid("parameters", "expected an object");
  for (const auto& [key, value] : params->items()) {
    inference::ModelRepositoryParameter p;
    if (value.is_string()) {
      p.set_string_param(value.get<std::string>());
    } else if (value.is_boolean()) {
      p.set_bool_param(value.get<bool>());
    } else if (value.is_number_integer() && !(value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX)) {
      p.set_int64_param(value.get<int64_t>());
    } else {
      return Invalid(absl::StrCat("parameters.", key), "expected a string, integer or boolean");
    }
    out[key] = std::move(p);
  }
  return out;
}

absl::StatusOr<LogSettings> ParseLogSettings(absl::string_view body) {
  LogSettings out;
  ASSIGN_OR_RETURN(std::optional<Json> parsed, ParseOptionalObject(body, "expected a JSON object of log settings"));
  if (!parsed) return out;
  for (const auto& [key, value] : parsed->items()) {
    if (value.is_boolean()) {
      out[key] = value.get<bool>();
    } else if (value.is_number_unsigned() && value.get<uint64_t>() <= UINT32_MAX) {
      out[key] = static_cast<uint32_t>(value.get<uint64_t>());
    } else if (value.is_string()) {
      out[key] = value.get<std::string>();
    } else {
      return Invalid(absl::StrCat("settings.", key.substr(0, 64)),
                     "expected a boolean, an unsigned integer or a string");
    }
  }
  return out;
}

std::string LogSettingsToJson(const LogSettings& settings) {
  Json out = Json::object();
  for (const auto& [key, value] : settings) {
    std::visit([&out, &key = key](const auto& v) { out[key] = v; }, value);
  }
  return out.dump();
}

absl::StatusOr<TraceSettings::Change> ParseTraceSettingBody(absl::string_view body) {
  TraceSettings::Change out;
  ASSIGN_OR_RETURN(std::optional<Json> parsed, ParseOptionalObject(body, "expected a JSON object of trace settings"));
  if (!parsed) return out;
  for (const auto& [key, value] : parsed->items()) {
    const std::string field = key.substr(0, 64);
    if (value.is_null()) {
      out[key] = std::nullopt;
    } else if (value.is_string()) {
      out[key] = std::vector<std::string>{value.get<std::string>()};
    } else if (value.is_array()) {
      std::vector<std::string> values;
      for (const Json& v : value) {
        if (!v.is_string()) return Invalid(field, "expected an array of strings");
        values.push_back(v.get<std::string>());
      }
      out[key] = std::move(values);
    } else {
      return Invalid(field, "expected a string, an array of strings or null");
    }
  }
  return out;
}

std::string TraceSettingsToJson(const TraceSettings::Values& settings) {
  Json out = Json::object();
  for (const auto& [key, values] : settings) {
    if (key == "trace_level") {
      out[key] = values;
    } else {
      out[key] = values.empty() ? std::string() : values.front();
    }
  }
  return out.dump();
}

namespace {

// The first character of the value of `ready` when it is the body's first
// member ({"ready": ...), read without parsing; nullopt otherwise.
std::optional<char> FirstCharOfLeadingReady(absl::string_view body) {
  constexpr absl::string_view kSpace = " \t\r\n";
  auto skip = [&](size_t at) { return std::min(body.find_first_not_of(kSpace, at), body.size()); };
  size_t at = skip(0);
  if (at >= body.size() || body[at] != '{') return std::nullopt;
  at = skip(at + 1);
  if (!absl::StartsWith(body.substr(at), "\"ready\"")) return std::nullopt;
  at = skip(at + 7);
  if (at >= body.size() || body[at] != ':') return std::nullopt;
  at = skip(at + 1);
  if (at >= body.size()) return std::nullopt;
  return body[at];
}

absl::Status InvalidReady() {
  return absl::InvalidArgumentError("Invalid value for 'ready': expected a boolean (true or false)");
}

}  // namespace

absl::StatusOr<bool> ParseRepositoryIndexReady(absl::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == absl::string_view::npos) return false;
  // Triton checks the type of `ready` first: a value that is no boolean is
  // refused as such however deep it nests (its QA suite sends 250,000
  // levels), before the depth check would name the nesting instead.
  if (std::optional<char> first = FirstCharOfLeadingReady(body); first && *first != 't' && *first != 'f') {
    return InvalidReady();
  }
  ASSIGN_OR_RETURN(Json parsed, ParseJson(body, "the request body"));
  if (!parsed.is_object()) return Invalid("request body", "expected a JSON object");
  auto ready = parsed.find("ready");
  if (ready == parsed.end()) return false;
  if (!ready->is_boolean()) return InvalidReady();
  return ready->get<bool>();
}

std::string JsonError(absl::string_view message) {
  return absl::StrCat("{\"error\":", Quote(ForClients(message)), "}");
}

}  // namespace infergate
