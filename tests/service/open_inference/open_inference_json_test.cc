// The REST codec: JSON and binary bodies to the protocol's request, and the
// answer back, checked against LibTorch's own half and bfloat16 rounding.

#include "service/open_inference/open_inference_json.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "devices/half_float.h"

namespace infergate {
namespace {

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

absl::StatusOr<RestInferRequest> Parse(const std::string& json, CodecLimits limits = {}) {
  return ParseRestInferRequest(json, std::nullopt, "m", "", limits);
}

void ExpectInvalid(const std::string& json, const std::string& needle) {
  absl::StatusOr<RestInferRequest> r = Parse(json);
  ASSERT_FALSE(r.ok()) << json;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << json;
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message() << " lacks " << needle;
}

TEST(RestInferRequest, FlatAndNestedDataGiveTheSameRawBytes) {
  auto flat = Parse(R"({"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[1,2.5,-3,4]}]})");
  auto nested = Parse(R"({"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2.5],[-3,4]]}]})");
  ASSERT_TRUE(flat.ok()) << flat.status();
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_EQ(flat->request.raw_input_contents(0), nested->request.raw_input_contents(0));
  EXPECT_EQ(Floats(flat->request.raw_input_contents(0)), (std::vector<float>{1, 2.5f, -3, 4}));
  EXPECT_EQ(flat->request.model_name(), "m");
  EXPECT_EQ(flat->request.inputs(0).datatype(), "FP32");
  EXPECT_EQ(flat->request.inputs(0).shape_size(), 2);
}

TEST(RestInferRequest, EveryDatatypeIsEncodedLittleEndian) {
  auto r = Parse(R"({"inputs":[
      {"name":"b","shape":[3],"datatype":"BOOL","data":[true,false,true]},
      {"name":"u8","shape":[2],"datatype":"UINT8","data":[0,255]},
      {"name":"i8","shape":[2],"datatype":"INT8","data":[-128,127]},
      {"name":"i16","shape":[1],"datatype":"INT16","data":[-2]},
      {"name":"i32","shape":[1],"datatype":"INT32","data":[-3]},
      {"name":"i64","shape":[1],"datatype":"INT64","data":[-9007199254740993]},
      {"name":"f64","shape":[1],"datatype":"FP64","data":[0.1]},
      {"name":"f16","shape":[1],"datatype":"FP16","data":[1.5]},
      {"name":"bf16","shape":[1],"datatype":"BF16","data":[-2]}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& raw = r->request.raw_input_contents();
  EXPECT_EQ(raw[0], std::string("\x01\x00\x01", 3));
  EXPECT_EQ(raw[1], std::string("\x00\xff", 2));
  EXPECT_EQ(raw[2], std::string("\x80\x7f", 2));
  EXPECT_EQ(raw[3], std::string("\xfe\xff", 2));
  EXPECT_EQ(raw[4], std::string("\xfd\xff\xff\xff", 4));
  int64_t i64;
  std::memcpy(&i64, raw[5].data(), 8);
  EXPECT_EQ(i64, -9007199254740993LL);  // not rounded through a double
  double f64;
  std::memcpy(&f64, raw[6].data(), 8);
  EXPECT_EQ(f64, 0.1);
  EXPECT_EQ(raw[7], std::string("\x00\x3e", 2));  // 1.5 in half
  EXPECT_EQ(raw[8], std::string("\x00\xc0", 2));  // -2 in bfloat16
}

TEST(RestInferRequest, BinaryInputsAreSlicedFromAfterTheJson) {
  const std::string json =
      R"({"inputs":[{"name":"a","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}},)"
      R"({"name":"b","shape":[1],"datatype":"INT64","data":[7]},)"
      R"({"name":"c","shape":[1],"datatype":"INT32","parameters":{"binary_data_size":4}}],)"
      R"("outputs":[{"name":"y","parameters":{"binary_data":true}},{"name":"z"}],"id":"req-1",)"
      R"("parameters":{"device":"cpu","timeout":5000,"binary_data_output":false}})";
  float a[2] = {1.25f, -8};
  int32_t c = 42;
  std::string body = json + std::string(reinterpret_cast<char*>(a), 8) + std::string(reinterpret_cast<char*>(&c), 4);
  auto r = ParseRestInferRequest(body, json.size(), "m", "3", {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Floats(r->request.raw_input_contents(0)), (std::vector<float>{1.25f, -8}));
  EXPECT_EQ(r->request.raw_input_contents(2), std::string(reinterpret_cast<char*>(&c), 4));
  EXPECT_EQ(r->request.model_version(), "3");
  EXPECT_EQ(r->request.id(), "req-1");
  EXPECT_EQ(r->request.parameters().at("device").string_param(), "cpu");
  EXPECT_EQ(r->request.parameters().at("timeout").int64_param(), 5000);
  EXPECT_EQ(r->request.parameters().count("binary_data_output"), 0u);
  EXPECT_FALSE(r->all_outputs_binary);
  EXPECT_EQ(r->binary_outputs, (std::set<std::string>{"y"}));
  ASSERT_EQ(r->request.outputs_size(), 2);
  EXPECT_EQ(r->request.outputs(1).name(), "z");
}

TEST(RestInferRequest, BadBodiesNameTheFieldAtFault) {
  ExpectInvalid("{", "not valid JSON");
  ExpectInvalid("[]", "expected a JSON object");
  ExpectInvalid(R"({})", "inputs: is missing");
  ExpectInvalid(R"({"inputs":{}})", "inputs: expected an array");
  ExpectInvalid(R"({"inputs":[{"shape":[1],"datatype":"FP32","data":[1]}]})", "inputs[0].name: is missing");
  // What is not JSON is said first, whatever else the body lacks.
  ExpectInvalid(R"({"inputs":[{"shape":[3],"datatype":"FP32","data":[-1, 2, .27]}]})", "not valid JSON");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1],"datatype":"UINT64","data":[1]}]})", "inputs[0].datatype");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[2],"datatype":"BYTES","data":["a",1]}]})", "inputs[0].data[1]");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[2],"datatype":"BYTES","data":["a"]}]})", "inputs[0].data");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1],"data":[1]}]})", "inputs[0].datatype: is missing");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","data":[1]}]})", "inputs[0].shape: is missing");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1,"2"],"datatype":"FP32","data":[1]}]})", "inputs[0].shape[1]");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[-1],"datatype":"FP32","data":[1]}]})", "inputs[0].shape");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[3],"datatype":"FP32","data":[1,2]}]})",
                "inputs[0].data: holds 2 values but its shape needs 3");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1,2]}]})", "inputs[0].data");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1,"a"]}]})", "inputs[0].data[1]");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT8","data":[128]}]})", "does not fit INT8");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":[1.5]}]})", "expected an integer");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1],"datatype":"BOOL","data":[1]}]})", "expected true or false");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32"}]})", "inputs[0].data: is missing");
  ExpectInvalid(
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1],"parameters":{"binary_data_size":4}}]})",
      "has both data and");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}]})",
                "only 0 bytes of binary data are left");
  ExpectInvalid(R"({"inputs":[],"parameters":{"device":["cpu"]}})", "parameters.device");
  ExpectInvalid(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"binary_data":1}}]})",
                "outputs[0].parameters.binary_data");
  ExpectInvalid(R"({"inputs":[],"id":5})", "id: expected a string");
}

TEST(RestInferRequest, NestingDeeperThanAnyRankIsRefusedWithoutRecursion) {
  std::string deep = std::string(100000, '[') + "1" + std::string(100000, ']');
  // Refused by the whole body's depth, before a tree is built.
  ExpectInvalid(
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":)" + deep + "}]}",
      "JSON nesting depth exceeds maximum allowed limit (100): the request body is nested 100003 levels deep");
}

// Peak resident memory (VmHWM) since the last ResetPeak, in KiB.
uint64_t PeakKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6));
  }
  return 0;
}
void ResetPeak() { std::ofstream("/proc/self/clear_refs") << "5"; }

// The shape claims 2^28 FP64 values (2 GiB) and `data` holds one: refused
// for the count before any memory is taken (the tensor was once sized from
// the shape and zero-filled first).
TEST(RestInferRequest, AShapeLargerThanItsDataCostsNoMemory) {
  ResetPeak();
  const uint64_t before = PeakKib();
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[268435456],"datatype":"FP64","data":[1]}]})",
                "inputs[0].data: holds 1 values but its shape needs 268435456");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[1,2,3,4,5]}]})",
                "holds more than the 4 values");
  const uint64_t after = PeakKib();
  std::cout << "peak RSS " << before << " KiB before, " << after << " KiB after\n";
  EXPECT_LT(after, before + 64 * 1024) << "the refused request took memory for its shape";
}

TEST(RestInferRequest, ZeroSizeDimensionsCannotHideHugeOnes) {
  CodecLimits limits;
  limits.max_elements = 1 << 20;
  auto r =
      Parse(R"({"inputs":[{"name":"x","shape":[0,1099511627776,1099511627776],"datatype":"FP32","data":[]}]})", limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("inputs[0].shape"), std::string::npos) << r.status();
}

TEST(RestInferRequest, BinaryBytesTheInputsDoNotAccountForAreRefused) {
  const std::string json = R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})";
  auto r = ParseRestInferRequest(json + "xxxx", json.size(), "m", "", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("4 bytes of binary data"), std::string::npos) << r.status();
  auto too_long = ParseRestInferRequest(json, json.size() + 1, "m", "", {});
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("Inference-Header-Content-Length"), std::string::npos);
}

inference::ModelInferResponse Answer() {
  inference::ModelInferResponse resp;
  resp.set_model_name("m");
  resp.set_model_version("1");
  resp.set_id("abc");
  (*resp.mutable_parameters())["device"].set_string_param("cpu");
  (*resp.mutable_parameters())["fell_back"].set_bool_param(true);
  (*resp.mutable_parameters())["batch_size"].set_int64_param(4);
  auto* y = resp.add_outputs();
  y->set_name("y");
  y->set_datatype("FP32");
  y->add_shape(1);
  y->add_shape(3);
  float v[3] = {0.1f, -2, 1e-8f};
  resp.add_raw_output_contents(std::string(reinterpret_cast<char*>(v), 12));
  auto* z = resp.add_outputs();
  z->set_name("z");
  z->set_datatype("INT64");
  z->add_shape(2);
  int64_t w[2] = {-1, 9007199254740993LL};
  resp.add_raw_output_contents(std::string(reinterpret_cast<char*>(w), 16));
  return resp;
}

TEST(RestInferResponse, JsonDataRoundTripsFloat32AndInt64Exactly) {
  RestInferRequest req;
  absl::StatusOr<RestBody> body = WriteRestInferResponse(Answer(), req);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_FALSE(body->json_length.has_value());
  EXPECT_EQ(body->body,
            R"({"model_name":"m","model_version":"1","id":"abc","parameters":{"batch_size":4,"device":"cpu",)"
            R"("fell_back":true},"outputs":[{"name":"y","datatype":"FP32","shape":[1,3],"data":[0.1,-2,1e-08]},)"
            R"({"name":"z","datatype":"INT64","shape":[2],"data":[-1,9007199254740993]}]})");
}

// Names are written as JSON strings whatever bytes they hold: plain ASCII as
// it is, anything else escaped as the JSON library escapes it (bytes that
// are not UTF-8 as U+FFFD).
TEST(RestInferResponse, NamesAreQuotedAsTheJsonLibraryQuotesThem) {
  const std::vector<std::string> names = {"m",
                                          "",
                                          "a model-name_1.2 (x)/y",
                                          "say \"hi\"",
                                          "back\\slash",
                                          std::string("nul\0in", 6),
                                          "tab\tnew\nline\x01\x1f",
                                          "del\x7f",
                                          "caf\xc3\xa9 \xe2\x82\xac",
                                          "bad \xff\xfe utf-8 \xc3",
                                          "~ ` ! @ # $ % ^ & * { } [ ] : ; ' < > ? , ."};
  for (const std::string& name : names) {
    inference::ModelInferResponse resp = Answer();
    resp.set_model_name(name);
    resp.mutable_outputs(0)->set_name(name);
    absl::StatusOr<RestBody> body = WriteRestInferResponse(resp, RestInferRequest{});
    ASSERT_TRUE(body.ok()) << body.status();
    const std::string quoted = nlohmann::json(name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    EXPECT_EQ(body->body.rfind("{\"model_name\":" + quoted + ",\"model_version\":\"1\"", 0), 0u) << body->body;
    EXPECT_NE(body->body.find("{\"name\":" + quoted + ",\"datatype\":\"FP32\""), std::string::npos) << body->body;
    EXPECT_TRUE(nlohmann::json::accept(body->body)) << body->body;
  }
}

TEST(RestInferResponse, BinaryOutputsFollowTheJsonInOrder) {
  RestInferRequest req;
  req.all_outputs_binary = true;
  req.json_outputs = {"z"};
  absl::StatusOr<RestBody> body = WriteRestInferResponse(Answer(), req);
  ASSERT_TRUE(body.ok()) << body.status();
  ASSERT_TRUE(body->json_length.has_value());
  const std::string json = body->body.substr(0, *body->json_length);
  EXPECT_NE(json.find(R"("name":"y","datatype":"FP32","shape":[1,3],"parameters":{"binary_data_size":12}})"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("data":[-1,9007199254740993])"), std::string::npos) << json;
  EXPECT_EQ(body->body.substr(*body->json_length), Answer().raw_output_contents(0));
}

TEST(HalfPrecision, ConversionsMatchLibTorchsRounding) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-70000.0f, 70000.0f);
  std::uniform_real_distribution<float> tiny(-1e-4f, 1e-4f);
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               65504.0f,
                               65520.0f,
                               1e-8f,
                               6e-8f,
                               3e-5f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity()};
  for (int i = 0; i < 20000; ++i) values.push_back(i % 2 ? wide(rng) : tiny(rng));
  for (float v : values) {
    c10::Half h(v);
    EXPECT_EQ(FloatToHalf(v), h.x) << v;
    EXPECT_EQ(HalfToFloat(h.x), static_cast<float>(h)) << v;
    c10::BFloat16 b(v);
    EXPECT_EQ(FloatToBFloat16(v), b.x) << v;
    EXPECT_EQ(BFloat16ToFloat(b.x), static_cast<float>(b)) << v;
  }
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
}

TEST(ProtoToJson, SixtyFourBitIntegersAreNumbersAndEnumsNames) {
  inference::ModelConfigResponse resp;
  inference::ModelConfig* c = resp.mutable_config();
  c->set_name("m");
  c->set_max_batch_size(8);
  auto* in = c->add_input();
  in->set_name("x");
  in->set_data_type(inference::TYPE_FP32);
  in->add_dims(-1);
  in->add_dims(9007199254740993LL);
  std::string json = ProtoToJson(*c);
  EXPECT_NE(json.find(R"("dims":[-1,9007199254740993])"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("data_type":"TYPE_FP32")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("max_batch_size":8)"), std::string::npos) << json;
  EXPECT_EQ(json.find("dynamic_batching"), std::string::npos) << "an unset message is left out: " << json;
}

TEST(RepositoryBodies, ParametersAndReadyFlag) {
  auto params = ParseRepositoryParameters(R"({"parameters":{"device":"cpu","version":2}})");
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->at("device").string_param(), "cpu");
  EXPECT_EQ(params->at("version").int64_param(), 2);
  EXPECT_TRUE(ParseRepositoryParameters("").ok());
  EXPECT_FALSE(ParseRepositoryParameters(R"({"parameters":{"device":[1]}})").ok());
  EXPECT_EQ(*ParseRepositoryIndexReady(R"({"ready":true})"), true);
  EXPECT_EQ(*ParseRepositoryIndexReady(""), false);
  EXPECT_FALSE(ParseRepositoryIndexReady(R"({"ready":"yes"})").ok());
  EXPECT_EQ(JsonError("a \"quoted\"\n"), R"({"error":"a \"quoted\"\n"})");
}

// Triton's texts for what its QA suite sends (qa/L0_http): a `ready` that
// is no boolean however deep it nests, nesting past 100, overflowing
// shapes, a repeated output name (the codec's test).
TEST(TritonTexts, RefusalsCarryTritonsWordsFirst) {
  const std::string deep = std::string(250000, '[') + "true" + std::string(250000, ']');
  for (const std::string& body :
       std::vector<std::string>{R"({"ready":"yes"})", R"({ "ready" : [true]})", "{\"ready\":" + deep + "}"}) {
    absl::StatusOr<bool> ready = ParseRepositoryIndexReady(body);
    ASSERT_FALSE(ready.ok()) << body.substr(0, 40);
    EXPECT_EQ(ready.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(ready.status().message().find("Invalid value for 'ready': expected a boolean"), std::string::npos)
        << ready.status();
  }
  EXPECT_EQ(*ParseRepositoryIndexReady(R"( {"ready": false} )"), false);
  // Nesting: 50 levels of data pass the depth check, 120 do not.
  auto nested = [](int depth) {
    return R"({"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"INT64","data":)" + std::string(depth, '[') + "123" +
           std::string(depth, ']') + "}]}";
  };
  absl::StatusOr<RestInferRequest> fifty = Parse(nested(50));
  EXPECT_TRUE(fifty.ok() || fifty.status().message().find("nesting depth") == std::string::npos) << fifty.status();
  ExpectInvalid(nested(120), "JSON nesting depth exceeds maximum allowed limit (100)");
  // Shapes whose element count, or byte count, passes INT64_MAX.
  ExpectInvalid(R"({"inputs":[{"name":"INPUT0","shape":[16,1152921504606846978],"datatype":"FP32","data":[1.0]}]})",
                "invalid shape for input 'INPUT0': shape [16,1152921504606846978] causes total element count to "
                "exceed maximum size of 9223372036854775807");
  ExpectInvalid(R"({"inputs":[{"name":"INPUT0","shape":[4,1152921504606846978],"datatype":"FP32","data":[1.0]}]})",
                "byte size overflow for input 'INPUT0': element count (4611686018427387912) * data type size (4) "
                "exceeds maximum allowed size (9223372036854775807)");
  // A negative dimension: Triton's words (it reads dimensions as unsigned), then the dimension.
  ExpectInvalid(R"({"inputs":[{"name":"INPUT0","shape":[2,-5],"datatype":"FP32","data":[1.0]}]})",
                "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer "
                "(inputs[0].shape[1]: -5 is negative)");
  // Within INT64_MAX, the element limit's own words.
  ExpectInvalid(R"({"inputs":[{"name":"INPUT0","shape":[1000000000000],"datatype":"FP32","data":[1.0]}]})",
                "inputs[0].shape");
}

}  // namespace
}  // namespace infergate
