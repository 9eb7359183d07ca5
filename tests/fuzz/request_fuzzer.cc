// libFuzzer target: arbitrary bytes through request parsing, the wire
// tensor checks and input matching exactly as the server runs them, through
// the REST API's JSON and binary bodies, through model-config parsing, and
// through a load's Triton config, compressed bodies, log settings and the
// zip directory of model packages (.pt2), and BYTES tensors' serialized
// strings (4-byte lengths, then the bytes). The
// first byte picks the path; the request path's seeds are text InferRequests
// in request_seeds/, which run.sh encodes behind their routing byte. The last step
// of decoding (at::from_blob over checked bytes) is LibTorch's; the fuzzer
// links no LibTorch, to keep its build quick.
//   build-fuzz/tests/fuzz/request_fuzzer tests/fuzz/corpus -max_total_time=600

#include <google/protobuf/text_format.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "common/wire_strings.h"
#include "common/zip_extract.h"
#include "common/zip_listing.h"
#include "devices/device_id.h"
#include "google/protobuf/util/message_differencer.h"
#include "inference/grpc_service.pb.h"
#include "infergate/v1/inference.pb.h"
#include "scheduler/repository/aoti_package.h"
#include "scheduler/repository/config_override.h"
#include "scheduler/repository/input_signature.h"
#include "scheduler/repository/model_config.h"
#include "scheduler/repository/model_name.h"
#include "scheduler/repository/model_repository.h"
#include "scheduler/repository/torchserve/torchserve_config.h"
#include "service/call/wire_tensor.h"
#include "service/grpc/wire_scan.h"
#include "service/http/content_encoding.h"
#include "service/http/json_scan.h"
#include "service/http/multipart_form.h"
#include "service/open_inference/log_settings.h"
#include "service/open_inference/open_inference_datatype.h"
#include "service/open_inference/open_inference_json.h"
#include "service/open_inference/raw_infer_request.h"
#include "service/open_inference/triton_model_config.h"
#include "service/torchserve/image_decode.h"
#include "service/v1/v1_request_check.h"

namespace {

using namespace infergate;

InputSignature MlpSignature() {
  InputSignature sig;
  sig.max_batch_size = 64;
  sig.inputs.push_back({"x", DType::kFloat32, std::vector<int64_t>{256}});
  return sig;
}

InputSignature PairSignature() {
  InputSignature sig;
  sig.inputs.push_back({"a", std::nullopt, std::nullopt});
  sig.inputs.push_back({"b", DType::kInt64, std::vector<int64_t>{-1, 3}});
  return sig;
}

// A property the server relies on; a violation is a crash libFuzzer reports,
// with the line of the property that failed.
void Require(bool property, int line = __builtin_LINE()) {
  if (property) return;
  std::fprintf(stderr, "request_fuzzer.cc:%d: property violated\n", line);
  __builtin_trap();
}

// The wire scan (service/grpc/wire_scan.h) against protobuf's parser: it
// never crashes, reads the same whatever the slices, and calls malformed no
// message the parser takes (it may refuse one over a limit).
void CheckWireScan(const google::protobuf::Descriptor& type, const uint8_t* data, size_t size, bool parsed) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  WireScanLimits limits;
  absl::StatusOr<WireCost> whole = ScanWire(type, bytes, limits);
  const size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  const absl::string_view chunks[] = {bytes.substr(0, cut), bytes.substr(cut)};
  absl::StatusOr<WireCost> sliced = ScanWire(type, absl::MakeConstSpan(chunks), limits);
  Require(whole.ok() == sliced.ok());
  if (whole.ok()) Require(whole->parsed_bytes == sliced->parsed_bytes);
  if (parsed && !whole.ok()) Require(!absl::StrContains(whole.status().message(), "does not parse"));
}

void FuzzRequest(const uint8_t* data, size_t size) {
  v1::InferRequest req;
  const bool parsed = req.ParseFromArray(data, static_cast<int>(size));
  CheckWireScan(*v1::InferRequest::descriptor(), data, size, parsed);
  {
    inference::ModelInferRequest other;
    CheckWireScan(*inference::ModelInferRequest::descriptor(), data, size,
                  other.ParseFromArray(data, static_cast<int>(size)));
  }
  if (!parsed) return;
  // The Infer handler's own checks (CheckInferRequest), then the properties
  // of the core's parsers it hands the request to.
  // An accepted model name is one path component inside the repository.
  if (ValidateModelName(req.model()).ok()) {
    const std::string& name = req.model();
    Require(!name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
            name.find('\\') == std::string::npos && name.find('\0') == std::string::npos);
  }
  if (!req.version().empty()) {
    // An accepted version is its digits' value: "007" is 7, nothing else parses.
    absl::StatusOr<int64_t> v = ParseVersion(req.version(), "version");
    if (v.ok()) {
      size_t first = req.version().find_first_not_of('0');
      Require(*v >= 0 && absl::StrCat(*v) == (first == std::string::npos ? "0" : req.version().substr(first)));
    }
  }
  // A device string that parses prints in a canonical form that parses to the same request.
  if (absl::StatusOr<DeviceRequest> dev = ParseDeviceRequest(req.device()); dev.ok()) {
    absl::StatusOr<DeviceRequest> again = ParseDeviceRequest(dev->ToString());
    Require(again.ok() && again->ToString() == dev->ToString() && again->automatic == dev->automatic &&
            again->kind == dev->kind && again->index == dev->index && again->any_index == dev->any_index);
  }
  CodecLimits limits;
  limits.max_elements = int64_t{1} << 20;  // keep allocations small under ASan
  absl::StatusOr<CheckedInferRequest> checked = CheckInferRequest(req, limits);
  if (!checked.ok()) {
    // Every refusal names a field of the request.
    const absl::string_view message = checked.status().message();
    Require(checked.status().code() == absl::StatusCode::kInvalidArgument &&
            (absl::StartsWith(message, "inputs") || absl::StartsWith(message, "precision") ||
             absl::StartsWith(message, "fallback")));
    return;
  }
  Require(checked->inputs.size() == static_cast<size_t>(req.inputs_size()));
  Require(checked->allow_fallback == (req.fallback() == v1::ALLOW));
  const std::vector<WireTensorInfo>& infos = checked->inputs;
  for (size_t i = 0; i < infos.size(); ++i) {
    const WireTensorInfo& info = infos[i];
    // What the decoder will wrap: exactly elements x width bytes, within the limits.
    Require(info.elements <= limits.max_elements);
    Require(static_cast<int>(info.shape.size()) <= limits.max_rank);
    Require(req.inputs(static_cast<int>(i)).data().size() ==
            static_cast<size_t>(info.elements) * ElementSize(info.dtype));
    int64_t product = 1;
    for (int64_t d : info.shape) {
      Require(d >= 0);
      product *= d;
    }
    Require(product == info.elements);
  }
  std::vector<TensorMeta> metas;
  for (size_t i = 0; i < infos.size(); ++i) {
    metas.push_back({req.inputs(static_cast<int>(i)).name(), infos[i].dtype, infos[i].shape});
  }
  for (const InputSignature& sig : {MlpSignature(), PairSignature()}) {
    absl::StatusOr<std::vector<size_t>> matched = MatchInputs(sig, metas, "model");
    if (!matched.ok()) continue;
    // One request tensor per signature input, each used once.
    Require(matched->size() == sig.inputs.size());
    std::vector<bool> used(metas.size(), false);
    for (size_t index : *matched) {
      Require(index < metas.size() && !used[index]);
      used[index] = true;
    }
  }
  (void)BatchRows(MlpSignature(), metas);
}

// A config that parses prints as text that parses back to the same config.
// One read from Triton's schema carries the text it came from
// (triton_config_text), which the server sets and a config may not: the
// rest of it must round-trip.
void FuzzConfig(const uint8_t* data, size_t size) {
  absl::StatusOr<v1::ModelConfig> config =
      ParseModelConfig(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!config.ok()) return;
  config->clear_triton_config_text();
  std::string printed;
  Require(google::protobuf::TextFormat::PrintToString(*config, &printed));
  absl::StatusOr<v1::ModelConfig> again = ParseModelConfig(printed, "fuzz");
  Require(again.ok() && again->SerializeAsString() == config->SerializeAsString());
}

// The values and depth of a parsed JSON tree, to hold ScanJson to.
void Measure(const nlohmann::json& j, int depth, uint64_t* values, int* max_depth) {
  ++*values;
  if (!j.is_structured()) return;
  *max_depth = std::max(*max_depth, depth + 1);
  for (const auto& item : j) Measure(item, depth + 1, values, max_depth);
}

// What the server charges and refuses before parsing is what parsing
// finds: the scan's depth is the tree's and its value count an upper bound.
// (Bodies with a NUL byte, at which nlohmann's parser would end the
// document, are refused by the check.)
void CheckScan(absl::string_view text) {
  const JsonScan scan = ScanJson(text);
  if (!CheckScannedJson(scan, "body").ok()) return;
  nlohmann::json tree = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (tree.is_discarded()) return;
  uint64_t values = 0;
  int depth = 0;
  Measure(tree, 0, &values, &depth);
  Require(scan.values >= values);
  Require(scan.max_depth == depth);
}

// A REST infer body (the first two bytes pick where the JSON ends, as the
// Inference-Header-Content-Length header does). Whatever parses is answered
// back as outputs, and that answer's JSON must itself be valid JSON.
void FuzzRestBody(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const size_t split = (static_cast<size_t>(data[0]) << 8 | data[1]);
  absl::string_view body(reinterpret_cast<const char*>(data + 2), size - 2);
  std::optional<uint64_t> json_length;
  if (split != 0xffff) json_length = std::min<size_t>(split, body.size());
  CheckScan(json_length ? body.substr(0, *json_length) : body);
  CodecLimits limits;
  limits.max_elements = int64_t{1} << 16;
  absl::StatusOr<RestInferRequest> parsed = ParseRestInferRequest(body, json_length, "m", "", limits);
  // Numeric data decoded from the text changes no answer: the same
  // request, or the same error, as every value through the JSON tree.
  absl::StatusOr<RestInferRequest> by_tree =
      ParseRestInferRequest(body, json_length, "m", "", limits, JsonDataDecoding::kTree);
  Require(parsed.ok() == by_tree.ok());
  if (!parsed.ok()) {
    Require(parsed.status() == by_tree.status());
    return;
  }
  Require(google::protobuf::util::MessageDifferencer::Equals(parsed->request, by_tree->request));
  Require(parsed->all_outputs_binary == by_tree->all_outputs_binary);
  Require(parsed->binary_outputs == by_tree->binary_outputs && parsed->json_outputs == by_tree->json_outputs);
  inference::ModelInferResponse response;
  response.set_model_name("m");
  response.set_id(parsed->request.id());
  for (int i = 0; i < parsed->request.inputs_size(); ++i) {
    const auto& in = parsed->request.inputs(i);
    std::optional<DType> dtype = KnownDatatype(in.datatype());
    Require(dtype.has_value());  // the parser accepted no datatype it does not know
    const std::string& bytes = parsed->request.raw_input_contents(i);
    if (bytes.size() % ElementSize(*dtype) != 0) continue;  // a binary input of the wrong size: the decoder refuses it
    auto* out = response.add_outputs();
    out->set_name(in.name());
    out->set_datatype(in.datatype());
    *out->mutable_shape() = in.shape();
    response.add_raw_output_contents(bytes);
  }
  absl::StatusOr<RestBody> answer = WriteRestInferResponse(response, *parsed);
  if (!answer.ok()) return;
  const std::string json = answer->json_length ? answer->body.substr(0, *answer->json_length) : answer->body;
  Require(nlohmann::json::accept(json));
}

// Triton's raw binary request against a configuration made of the first
// bytes (datatype, batching, up to three dims, 0xFF a variable one); the
// rest is the body. Whatever is accepted is one input whose shape has no
// variable dimension left and whose bytes are the body's (after a 4-byte
// length for BYTES).
void FuzzRawBody(const uint8_t* data, size_t size) {
  if (size < 2) return;
  inference::ModelConfig config;
  const int inputs = data[1] >> 6;  // 0..3 inputs declared
  for (int i = 0; i < inputs; ++i) {
    inference::ModelInput* in = config.add_input();
    in->set_name(absl::StrCat("in", i));
    in->set_data_type(static_cast<inference::DataType>(data[0] % 15));
  }
  if (data[1] & 0x20) config.set_max_batch_size(8);
  const size_t dims = std::min<size_t>(data[1] & 0x3, size - 2);
  for (size_t d = 0; d < dims && inputs > 0; ++d) {
    config.mutable_input(0)->add_dims(data[2 + d] == 0xFF ? -1 : data[2 + d]);
  }
  absl::string_view body(reinterpret_cast<const char*>(data + 2 + dims), size - 2 - dims);
  absl::StatusOr<RestInferRequest> parsed = ParseRawInferRequest(body, config, "m", "");
  if (!parsed.ok()) {
    Require(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  Require(inputs == 1 && parsed->request.inputs_size() == 1 && parsed->request.raw_input_contents_size() == 1);
  for (int64_t d : parsed->request.inputs(0).shape()) Require(d >= 0);
  const bool bytes = parsed->request.inputs(0).datatype() == "BYTES";
  Require(parsed->request.raw_input_contents(0).size() == body.size() + (bytes ? 4 : 0));
  Require(parsed->all_outputs_binary);
}

// A load request's `config` parameter (Triton's JSON model configuration):
// read without an exception escaping, and whatever it accepts either makes
// a config the file checks accept, which prints and parses back the same,
// or is refused by them.
void FuzzTritonConfig(const uint8_t* data, size_t size) {
  absl::string_view json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ConfigOverride> patch = ConfigOverrideFromTritonJson(json, "m");
  if (!patch.ok()) {
    Require(patch.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  v1::ModelConfig base;
  base.set_name("m");
  absl::StatusOr<v1::ModelConfig> merged = CheckModelConfig(ApplyConfigOverride(base, *patch), "m", "fuzz");
  if (!merged.ok()) return;
  std::string printed;
  Require(google::protobuf::TextFormat::PrintToString(*merged, &printed));
  absl::StatusOr<v1::ModelConfig> again = ParseModelConfig(printed, "m");
  Require(again.ok() && again->SerializeAsString() == merged->SerializeAsString());
}

// A compressed REST body: the inflated size never passes the limit, and
// every byte kept was accounted for before it was kept.
void FuzzContentEncoding(const uint8_t* data, size_t size) {
  if (size < 1) return;
  static const char* const kEncodings[] = {"gzip", "deflate", "identity", "br", "x-gzip", "gzip, deflate"};
  const char* encoding = kEncodings[data[0] % 6];
  absl::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  constexpr uint64_t kLimit = 1 << 20;
  uint64_t accounted = 0;
  absl::StatusOr<std::string> out = DecodeContentEncoding(encoding, body, kLimit, [&](uint64_t bytes) {
    accounted += bytes;
    return absl::OkStatus();
  });
  if (!out.ok()) return;
  if (IsEncodedBody(encoding)) {
    Require(out->size() <= kLimit);
    Require(accounted >= out->size());
  } else {
    Require(*out == body);
  }
}

// A /v2/logging body: what is accepted and applied describes the level it
// set, and that description applied anew gives the same level.
void FuzzLogSettings(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const LogLevel from = static_cast<LogLevel>(data[0] % 4);
  absl::StatusOr<LogSettings> changes =
      ParseLogSettings(absl::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  if (!changes.ok()) return;
  absl::StatusOr<LogLevel> level = ApplyLogSettings(from, *changes);
  if (!level.ok()) return;
  absl::StatusOr<LogLevel> again = ApplyLogSettings(LogLevel::kError, DescribeLogSettings(*level));
  Require(again.ok() && *again == *level);
}

// A model package (.pt2) as the server first reads it: its zip directory
// and the variants' metadata. Whatever the bytes, an error or a listing
// whose entries lie inside the file.
void FuzzModelPackage(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/ig_fuzz_package_" + std::to_string(::getpid()) + ".pt2";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<ZipEntry>> entries = ListZip(path);
  if (entries.ok()) {
    for (const ZipEntry& e : *entries) {
      Require(e.local_header_offset <= size && e.compressed_size <= size - e.local_header_offset);
      absl::StatusOr<std::string> bytes = ReadStoredZipEntry(path, e, 1 << 16);
      if (bytes.ok()) Require(bytes->size() == e.size);
    }
  }
  absl::StatusOr<std::vector<AotiVariant>> variants = ReadAotiVariants(path);
  if (!variants.ok()) Require(variants.status().code() == absl::StatusCode::kInvalidArgument);
}

// A client's image for TorchServe's image_classifier (JPEG or PNG, whatever
// the bytes): an error, or exactly width x height RGB pixels within the
// pixel limit.
void FuzzImage(const uint8_t* data, size_t size) {
  ImageDecodeOptions options;
  options.max_pixels = 1 << 20;
  options.max_aspect_ratio = 100;
  absl::StatusOr<RgbImage> image =
      DecodeImage(absl::string_view(reinterpret_cast<const char*>(data), size), "body", options);
  if (!image.ok()) {
    Require(image.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  Require(image->width > 0 && image->height > 0 && uint64_t(image->width) * image->height <= (1 << 20));
  Require(std::max(image->width, image->height) <= 100 * std::min(image->width, image->height));
  Require(image->pixels.size() == size_t(image->width) * image->height * 3);
}

// A multipart form's field (the first line is the Content-Type), and a
// TorchServe config.properties: errors or answers, never a crash.
void FuzzTorchServeText(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const size_t newline = text.find('\n');
  const std::string type = text.substr(0, newline);
  const std::string body = newline == std::string::npos ? "" : text.substr(newline + 1);
  absl::StatusOr<absl::string_view> field = MultipartFormField(type, body);
  if (field.ok()) Require(field->data() >= body.data() && field->data() + field->size() <= body.data() + body.size());
  absl::StatusOr<TorchServeConfig> config = ParseTorchServeConfig(text);
  if (!config.ok()) Require(config.status().code() == absl::StatusCode::kInvalidArgument);
}

// A .mar archive as the server unpacks it: an error and an empty folder,
// or files that stay inside the folder and within the limit.
void FuzzArchive(const uint8_t* data, size_t size) {
  static const std::string root = "/tmp/ig_fuzz_mar_" + std::to_string(::getpid());
  const std::string path = root + ".mar";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root + "/out");
  ZipExtractLimits limits;
  limits.max_total_bytes = 1 << 20;
  absl::StatusOr<uint64_t> written = ExtractZip(path, root + "/out", limits);
  uint64_t found = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    Require(!e.is_symlink());
    if (e.is_regular_file()) found += e.file_size();
  }
  if (written.ok()) {
    Require(found == *written && *written <= limits.max_total_bytes);
  } else {
    Require(found == 0);
  }
}

}  // namespace

// A BYTES tensor's serialized strings: a 4-byte element count (its top
// bit makes it negative), then the bytes. Accepted means exactly that many
// strings, each inside the bytes, re-serializing to the same bytes;
// refused means INVALID_ARGUMENT naming the field.
void FuzzStrings(const uint8_t* data, size_t size) {
  if (size < 4) return;
  uint32_t count = 0;
  std::memcpy(&count, data, 4);
  const int64_t elements =
      (count & 0x80000000u) ? -static_cast<int64_t>(count & 0x7fffffffu) : static_cast<int64_t>(count);
  const absl::string_view bytes(reinterpret_cast<const char*>(data + 4), size - 4);
  absl::StatusOr<std::vector<absl::string_view>> parsed =
      ParseSerializedStrings(bytes, elements, "raw_input_contents[0]");
  if (!parsed.ok()) {
    Require(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    Require(absl::StartsWith(parsed.status().message(), "raw_input_contents[0]: "));
    return;
  }
  Require(elements >= 0 && parsed->size() == static_cast<size_t>(elements));
  Require(SerializedSize(*parsed) == bytes.size());
  std::string again;
  for (absl::string_view s : *parsed) {
    Require(s.data() >= bytes.data() && s.data() + s.size() <= bytes.data() + bytes.size());
    AppendSerializedString(s, &again);
    const std::optional<size_t> bad = FirstInvalidUtf8(s);
    Require(!bad || *bad < s.size());
  }
  Require(again == bytes);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // 0xF0..0xF8 pick the newer paths; the rest keep the routes the seed
  // corpus was written for.
  if (data[0] == 0xF0) {
    FuzzTritonConfig(data + 1, size - 1);
  } else if (data[0] == 0xF1) {
    FuzzContentEncoding(data + 1, size - 1);
  } else if (data[0] == 0xF2) {
    FuzzLogSettings(data + 1, size - 1);
  } else if (data[0] == 0xF3) {
    FuzzModelPackage(data + 1, size - 1);
  } else if (data[0] == 0xF4) {
    FuzzImage(data + 1, size - 1);
  } else if (data[0] == 0xF5) {
    FuzzTorchServeText(data + 1, size - 1);
  } else if (data[0] == 0xF6) {
    FuzzArchive(data + 1, size - 1);
  } else if (data[0] == 0xF7) {
    FuzzStrings(data + 1, size - 1);
  } else if (data[0] == 0xF8) {
    FuzzRawBody(data + 1, size - 1);
  } else if (data[0] % 4 == 0) {
    FuzzConfig(data + 1, size - 1);
  } else if (data[0] % 4 == 1) {
    FuzzRestBody(data + 1, size - 1);
  } else {
    FuzzRequest(data + 1, size - 1);
  }
  return 0;
}
