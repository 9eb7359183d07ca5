// The wire scan: what parsing a message will hold, read before it is
// parsed; limits on repeated messages, strings and unknown fields; any
// slicing of the bytes reads the same.
#include "service/grpc/wire_scan.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <memory>
#include <string>
#include <vector>

#include "inference/grpc_service.pb.h"
#include "infergate/v1/inference.pb.h"

namespace infergate {
namespace {

std::string LengthDelimited(int field, const std::string& payload) {
  std::string out;
  auto varint = [&out](uint64_t v) {
    while (v >= 0x80) {
      out.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    out.push_back(static_cast<char>(v));
  };
  varint(static_cast<uint64_t>(field) << 3 | 2);
  varint(payload.size());
  return out + payload;
}

std::string Repeat(const std::string& piece, int times) {
  std::string out;
  out.reserve(piece.size() * times);
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}

const google::protobuf::Descriptor& InferType() { return *inference::ModelInferRequest::descriptor(); }

TEST(WireScan, AnEmptyMessageCostsItsObject) {
  absl::StatusOr<WireCost> cost = ScanWire(InferType(), "", WireScanLimits());
  ASSERT_TRUE(cost.ok()) << cost.status();
  EXPECT_GE(cost->parsed_bytes, sizeof(inference::ModelInferRequest));
  EXPECT_EQ(cost->string_elements, 0);
  EXPECT_EQ(cost->unknown_fields, 0);
}

// 2 bytes on the wire, an object of ~100 bytes parsed: the H1 finding. The
// scan stops at the limit, naming the field, after reading only so far.
TEST(WireScan, EmptyRepeatedMessagesAreCountedAndCapped) {
  const std::string inputs = Repeat(LengthDelimited(5, ""), 2000);  // ModelInferRequest.inputs
  WireScanLimits limits;
  limits.max_repeated_messages = 1024;
  absl::StatusOr<WireCost> cost = ScanWire(InferType(), inputs, limits);
  ASSERT_FALSE(cost.ok());
  EXPECT_EQ(cost.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cost.status().message(), "inputs: holds more than 1024 entries");
  limits.max_repeated_messages = 4096;
  cost = ScanWire(InferType(), inputs, limits);
  ASSERT_TRUE(cost.ok()) << cost.status();
  EXPECT_GE(cost->parsed_bytes, 2000 * sizeof(inference::ModelInferRequest::InferInputTensor));
}

// Empty strings of bytes_contents: counted across the message, capped,
// the path naming the input.
TEST(WireScan, StringsAreCountedAcrossTheMessage) {
  inference::ModelInferRequest request;
  for (int i = 0; i < 3; ++i) {
    auto* input = request.add_inputs();
    input->set_name("t");
    for (int j = 0; j < 100; ++j) input->mutable_contents()->add_bytes_contents("");
  }
  const std::string bytes = request.SerializeAsString();
  WireScanLimits limits;
  absl::StatusOr<WireCost> cost = ScanWire(InferType(), bytes, limits);
  ASSERT_TRUE(cost.ok()) << cost.status();
  EXPECT_EQ(cost->string_elements, 300);
  limits.max_string_elements = 250;
  cost = ScanWire(InferType(), bytes, limits);
  ASSERT_FALSE(cost.ok());
  EXPECT_EQ(cost.status().message(),
            "inputs[2].contents.bytes_contents: holds more than 250 strings (the request's limit of string elements)");
}

TEST(WireScan, UnknownFieldsAreCountedAndCapped) {
  // ServerLiveRequest defines no field: every one is unknown.
  const std::string fields = Repeat(LengthDelimited(7, ""), 100);
  WireScanLimits limits;
  absl::StatusOr<WireCost> cost = ScanWire(*inference::ServerLiveRequest::descriptor(), fields, limits);
  ASSERT_TRUE(cost.ok()) << cost.status();
  EXPECT_EQ(cost->unknown_fields, 100);
  EXPECT_GE(cost->parsed_bytes, 100u * 32);
  limits.max_unknown_fields = 10;
  cost = ScanWire(*inference::ServerLiveRequest::descriptor(), fields, limits);
  ASSERT_FALSE(cost.ok());
  EXPECT_EQ(cost.status().message(), "request: carries more than 10 fields its message type does not define");
}

TEST(WireScan, MalformedBytesAreRefusedAsTheParserWould) {
  const std::string truncated = LengthDelimited(1, "model").substr(0, 4);
  absl::StatusOr<WireCost> cost = ScanWire(InferType(), truncated, WireScanLimits());
  ASSERT_FALSE(cost.ok());
  EXPECT_EQ(cost.status().message(), "request: not a valid inference.ModelInferRequest message (it does not parse)");
  // A field number of 0, an end-group tag with no group, a bad wire type.
  for (std::string bad : {std::string("\x02\x00", 2), std::string("\x0c"), std::string("\x0e\x00", 2)}) {
    EXPECT_FALSE(ScanWire(InferType(), bad, WireScanLimits()).ok()) << ::testing::PrintToString(bad);
  }
  // A nested message whose length runs past its parent's.
  const std::string overrun = LengthDelimited(5, LengthDelimited(1, "abcdef")).substr(0, 6);
  EXPECT_FALSE(ScanWire(InferType(), overrun, WireScanLimits()).ok());
}

// The heap the process holds (glibc's count; 0 where a sanitizer replaces
// the allocator).
uint64_t HeapInUse() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;  // chunks from the heap, and those mapped on their own
}

// The estimate is at least what parsing allocates (measured on the heap),
// and not wildly more, for the shapes requests take, maps included.
TEST(WireScan, TheEstimateCoversWhatParsingHolds) {
  std::vector<inference::ModelInferRequest> requests(6);
  requests[0].set_model_name("a-model-name-longer-than-fifteen");
  for (int i = 0; i < 8; ++i) {
    auto* input = requests[1].add_inputs();
    input->set_name("INPUT" + std::to_string(i));
    input->set_datatype("FP32");
    input->add_shape(1);
    input->add_shape(16);
    for (int j = 0; j < 16; ++j) input->mutable_contents()->add_fp32_contents(1.5f);
  }
  requests[2].add_raw_input_contents(std::string(1 << 20, 'x'));
  for (int i = 0; i < 1000; ++i) requests[3].add_inputs()->mutable_contents()->add_bytes_contents("");
  for (int i = 0; i < 200; ++i) {
    (*requests[4].mutable_parameters())["key-" + std::to_string(i)].set_string_param("a value of some length");
  }
  for (int i = 0; i < 2000; ++i) requests[5].add_inputs()->add_shape(i);
  for (const auto& request : requests) {
    const std::string bytes = request.SerializeAsString();
    absl::StatusOr<WireCost> cost = ScanWire(InferType(), bytes, WireScanLimits());
    ASSERT_TRUE(cost.ok()) << cost.status();
    const uint64_t before = HeapInUse();
    auto parsed = std::make_unique<inference::ModelInferRequest>();
    ASSERT_TRUE(parsed->ParseFromString(bytes));
    const uint64_t after = HeapInUse();
    if (after == 0) continue;  // a sanitizer's allocator: the plain build measures
    const uint64_t used = after - before;
    EXPECT_GE(cost->parsed_bytes, used) << request.ShortDebugString().substr(0, 200);
    EXPECT_LE(cost->parsed_bytes, 4 * used + 4096) << request.ShortDebugString().substr(0, 200);
  }
}

// The bytes may come in any number of slices, split anywhere.
TEST(WireScan, AnySlicingReadsTheSame) {
  inference::ModelInferRequest request;
  request.set_model_name("model");
  auto* input = request.add_inputs();
  input->set_name("x");
  input->add_shape(300);
  for (int i = 0; i < 300; ++i) input->mutable_contents()->add_int64_contents(i * 1000);
  request.add_raw_input_contents("raw bytes");
  const std::string bytes = request.SerializeAsString();
  absl::StatusOr<WireCost> whole = ScanWire(InferType(), bytes, WireScanLimits());
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (size_t a = 0; a <= bytes.size(); a += 7) {
    for (size_t b = a; b <= bytes.size(); b += 13) {
      const absl::string_view view(bytes);
      const absl::string_view chunks[] = {view.substr(0, a), view.substr(a, b - a), absl::string_view(),
                                          view.substr(b)};
      absl::StatusOr<WireCost> sliced = ScanWire(InferType(), absl::MakeConstSpan(chunks), WireScanLimits());
      ASSERT_TRUE(sliced.ok()) << a << "," << b << ": " << sliced.status();
      EXPECT_EQ(sliced->parsed_bytes, whole->parsed_bytes) << a << "," << b;
    }
  }
}

// Nesting past the limit is refused (groups and messages alike).
TEST(WireScan, DeepNestingIsRefused) {
  std::string nested;
  for (int i = 0; i < 40; ++i) nested = "\x0b" + nested + "\x0c";  // groups of field 1, unknown
  WireScanLimits limits;
  absl::StatusOr<WireCost> cost = ScanWire(*inference::ServerLiveRequest::descriptor(), nested, limits);
  ASSERT_FALSE(cost.ok());
  EXPECT_NE(cost.status().message().find("nests messages more than 32 deep"), std::string::npos) << cost.status();
}

}  // namespace
}  // namespace infergate
